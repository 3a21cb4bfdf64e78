#pragma once
// Where the simulation's new memory goes. cudaMalloc segments: at their
// recorded addresses while the simulation makes the recording's segments
// in its order (the same decisions then put every block where torch put
// it), else where the model of the driver puts them (segment_addresses.h),
// below every address the recording used (the driver reserves top-down).
// Expandable segments' new address spaces: above every such address.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "allocator/caching_allocator.h"
#include "allocator/segment_addresses.h"
#include "allocator/simulate.h"

namespace memsight::simulate {

class SimAddresses {
 public:
  SimAddresses() = default;
  // The cudaMalloc'd segments at the start (start -> end), the address
  // spaces at the start, and the recorded segment events.
  SimAddresses(std::map<int64_t, int64_t> segments, const std::vector<alloc::AddressSpace>& spaces,
               const std::vector<SegmentEvent>& recorded);

  // A new cudaMalloc segment of `size` bytes: its address.
  int64_t new_segment(int64_t size);
  void released(int64_t addr, int64_t size);
  // A new expandable segment's address space of `size` bytes: its base.
  int64_t new_space(int64_t size) {
    int64_t base = synthetic_;
    synthetic_ += size;
    return base;
  }
  // Segments placed while the recording had no cudaMalloc address at all
  // to start the layout from (no such segment at the start nor in the
  // trace): every one sits where the model of the driver puts it.
  int64_t placed_unanchored() const { return placed_unanchored_; }

 private:
  std::map<int64_t, int64_t> segs_;  // cudaMalloc'd segments: start -> end
  alloc::SegmentAddresses addresses_{0};
  std::vector<std::pair<int64_t, int64_t>> recorded_allocs_;  // (address, size)
  size_t cursor_ = 0;
  bool lockstep_ = true;
  bool unanchored_ = false;
  int64_t placed_unanchored_ = 0;
  int64_t synthetic_ = 0;  // the next new address space
};

}  // namespace memsight::simulate
