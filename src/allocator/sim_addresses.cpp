// Where the simulation's new memory goes (see sim_addresses.h).
#include "allocator/sim_addresses.h"

#include <algorithm>
#include <iterator>

namespace memsight::simulate {

SimAddresses::SimAddresses(std::map<int64_t, int64_t> segments,
                           const std::vector<alloc::AddressSpace>& spaces,
                           const std::vector<SegmentEvent>& recorded)
    : segs_(std::move(segments)) {
  int64_t top = 0;
  for (const auto& [a, e] : segs_) top = std::max(top, e);
  for (const alloc::AddressSpace& sp : spaces) top = std::max(top, sp.base + sp.size);
  for (const SegmentEvent& e : recorded) {
    top = std::max(top, e.addr + e.size);
    if (e.action == Action::SegmentAlloc) recorded_allocs_.push_back({e.addr, e.size});
  }
  synthetic_ = std::max((top + (int64_t{1} << 30)) / (int64_t{1} << 30) * (int64_t{1} << 30),
                        int64_t{1} << 46);
  int64_t floor = synthetic_;
  for (const auto& [a, e] : segs_) floor = std::min(floor, a);
  for (const alloc::AddressSpace& sp : spaces) floor = std::min(floor, sp.base);
  for (const SegmentEvent& e : recorded) floor = std::min(floor, e.addr);
  addresses_ = alloc::SegmentAddresses(floor);
  for (const auto& [a, e] : segs_) addresses_.taken(a, e - a);
  unanchored_ = segs_.empty() && recorded_allocs_.empty();
}

int64_t SimAddresses::new_segment(int64_t size) {
  int64_t addr = 0;
  bool placed = false;
  if (lockstep_ && cursor_ < recorded_allocs_.size() && recorded_allocs_[cursor_].second == size) {
    int64_t at = recorded_allocs_[cursor_].first;
    auto it = segs_.upper_bound(at);
    bool overlaps = (it != segs_.end() && it->first < at + size) ||
                    (it != segs_.begin() && std::prev(it)->second > at);
    if (!overlaps) {
      ++cursor_;
      addresses_.taken(at, size);
      addr = at;
      placed = true;
    }
  }
  if (!placed) {
    lockstep_ = false;
    if (unanchored_) ++placed_unanchored_;
    addr = addresses_.place(size);
  }
  segs_[addr] = addr + size;
  return addr;
}

void SimAddresses::released(int64_t addr, int64_t size) {
  segs_.erase(addr);
  addresses_.release(addr, size);
}

}  // namespace memsight::simulate
