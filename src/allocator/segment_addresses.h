#pragma once
// Where cudaMalloc puts the segments a simulation creates beyond the
// recording's. It matters: torch's best fit takes the lowest address among
// free blocks of the same size, so the order of segments in memory decides
// which block a request splits, and with it the reserved peak (a history
// simulated with segments placed past every recorded address peaked 2%
// below the real run under roundup_power2_divisions:4).
//
// The driver, as the recordings show it (H100, CUDA 12): an allocation is
// placed at the free end of a range reserved earlier, the smallest free end
// that holds it (the lowest address on ties); else the driver reserves a
// new range, the size rounded up to 32 MiB, top-down: at the top of the
// highest released range that holds it, or below everything reserved. A
// range whose allocations are all freed is released.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

namespace memsight::alloc {

class SegmentAddresses {
 public:
  static constexpr int64_t kReserveUnit = int64_t{32} << 20;

  // Every address below which ranges are reserved: the lowest the
  // recording used.
  explicit SegmentAddresses(int64_t floor) : floor_(floor) {}

  // A segment at a known address (at the start of the trace, or where the
  // recording put it): in the range that holds it, else in a new one.
  void taken(int64_t addr, int64_t size) {
    take_released(addr, addr + size);
    if (auto c = chunk_at(addr); c != chunks_.end()) {
      c->second.top = std::max(c->second.top, addr + size);
      c->second.end = std::max(c->second.end, addr + size);
      ++c->second.live;
      return;
    }
    int64_t end = std::max(addr + size, addr + reserve_size(size));
    if (auto next = chunks_.upper_bound(addr); next != chunks_.end())
      end = std::max(addr + size, std::min(end, next->first));
    take_released(addr, end);
    chunks_[addr] = {end, addr + size, 1};
    floor_ = std::min(floor_, addr);
  }

  int64_t place(int64_t size) {
    auto best = chunks_.end();
    for (auto c = chunks_.begin(); c != chunks_.end(); ++c) {
      int64_t room = c->second.end - c->second.top;
      if (room >= size && (best == chunks_.end() || room < best->second.end - best->second.top))
        best = c;
    }
    if (best != chunks_.end()) {
      int64_t addr = best->second.top;
      best->second.top += size;
      ++best->second.live;
      return addr;
    }
    int64_t reserve = reserve_size(size), start = floor_ - reserve;
    for (auto r = released_.rbegin(); r != released_.rend(); ++r)
      if (r->second - r->first >= reserve) {
        start = r->second - reserve;
        break;
      }
    take_released(start, start + reserve);
    chunks_[start] = {start + reserve, start + size, 1};
    floor_ = std::min(floor_, start);
    return start;
  }

  void release(int64_t addr, int64_t size) {
    auto c = chunk_at(addr);
    if (c == chunks_.end()) return;
    if (c->second.top == addr + size) c->second.top = addr;
    if (--c->second.live > 0) return;
    int64_t start = c->first, end = c->second.end;
    chunks_.erase(c);
    // Merged with the released ranges it touches.
    if (auto next = released_.find(end); next != released_.end()) {
      end = next->second;
      released_.erase(next);
    }
    if (auto it = released_.lower_bound(start); it != released_.begin()) {
      auto prev = std::prev(it);
      if (prev->second == start) {
        prev->second = end;
        return;
      }
    }
    released_[start] = end;
  }

 private:
  struct Chunk {
    int64_t end, top;  // the range ends at `end`; [top, end) is still free
    int live;          // segments in it
  };
  static int64_t reserve_size(int64_t size) {
    return (size + kReserveUnit - 1) / kReserveUnit * kReserveUnit;
  }
  std::map<int64_t, Chunk>::iterator chunk_at(int64_t addr) {
    auto c = chunks_.upper_bound(addr);
    if (c == chunks_.begin()) return chunks_.end();
    --c;
    return addr < c->second.end ? c : chunks_.end();
  }
  // [start, end) is reserved again: out of the released ranges.
  void take_released(int64_t start, int64_t end) {
    auto it = released_.upper_bound(start);
    if (it != released_.begin()) --it;
    while (it != released_.end() && it->first < end) {
      auto [s, e] = *it;
      if (e <= start) {
        ++it;
        continue;
      }
      it = released_.erase(it);
      if (s < start) released_[s] = start;
      if (end < e) it = std::next(released_.emplace(end, e).first);
    }
  }

  std::map<int64_t, Chunk> chunks_;      // reserved ranges by start
  std::map<int64_t, int64_t> released_;  // released ranges: start -> end
  int64_t floor_;
};

}  // namespace memsight::alloc
