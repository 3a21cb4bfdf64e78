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
#include <set>
#include <utility>

#include "allocator/released_ranges.h"

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
    released_.take(addr, addr + size);
    if (auto c = chunk_at(addr); c != chunks_.end()) {
      reshape(c, std::max(c->second.top, addr + size), std::max(c->second.end, addr + size));
      ++c->second.live;
      return;
    }
    int64_t end = std::max(addr + size, addr + reserve_size(size));
    if (auto next = chunks_.upper_bound(addr); next != chunks_.end())
      end = std::max(addr + size, std::min(end, next->first));
    released_.take(addr, end);
    add_chunk(addr, {end, addr + size, 1});
    floor_ = std::min(floor_, addr);
  }

  int64_t place(int64_t size) {
    // The smallest room that holds it, the lowest address on ties.
    if (auto r = by_room_.lower_bound({size, INT64_MIN}); r != by_room_.end()) {
      auto best = chunks_.find(r->second);
      int64_t addr = best->second.top;
      reshape(best, addr + size, best->second.end);
      ++best->second.live;
      return addr;
    }
    int64_t reserve = reserve_size(size), start = floor_ - reserve;
    if (auto r = released_.highest_holding(reserve)) start = r->second - reserve;
    released_.take(start, start + reserve);
    add_chunk(start, {start + reserve, start + size, 1});
    floor_ = std::min(floor_, start);
    return start;
  }

  void release(int64_t addr, int64_t size) {
    auto c = chunk_at(addr);
    if (c == chunks_.end()) return;
    if (c->second.top == addr + size) reshape(c, addr, c->second.end);
    if (--c->second.live > 0) return;
    int64_t start = c->first, end = c->second.end;
    by_room_.erase(room_key(c));
    chunks_.erase(c);
    released_.release(start, end);
  }

 private:
  struct Chunk {
    int64_t end, top;  // the range ends at `end`; [top, end) is still free
    int live;          // segments in it
  };
  static int64_t reserve_size(int64_t size) {
    return (size + kReserveUnit - 1) / kReserveUnit * kReserveUnit;
  }
  using Chunks = std::map<int64_t, Chunk>;
  static std::pair<int64_t, int64_t> room_key(Chunks::const_iterator c) {
    return {c->second.end - c->second.top, c->first};
  }
  void add_chunk(int64_t start, Chunk chunk) {
    auto [c, added] = chunks_.try_emplace(start, chunk);
    if (!added) {
      by_room_.erase(room_key(c));
      c->second = chunk;
    }
    by_room_.insert(room_key(c));
  }
  // Every change of a range's free end goes through here, to keep by_room_.
  void reshape(Chunks::iterator c, int64_t top, int64_t end) {
    by_room_.erase(room_key(c));
    c->second.top = top;
    c->second.end = end;
    by_room_.insert(room_key(c));
  }
  Chunks::iterator chunk_at(int64_t addr) {
    auto c = chunks_.upper_bound(addr);
    if (c == chunks_.begin()) return chunks_.end();
    --c;
    return addr < c->second.end ? c : chunks_.end();
  }
  Chunks chunks_;  // reserved ranges by start
  // (free room, start) of every reserved range: place() takes the best fit
  // in a lookup, where a scan of every range made a history of n new
  // segments cost n^2.
  std::set<std::pair<int64_t, int64_t>> by_room_;
  ReleasedRanges released_;
  int64_t floor_;
};

}  // namespace memsight::alloc
