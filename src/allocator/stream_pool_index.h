#pragma once
// A device's streams and pools as the allocator numbers them. torch keeps
// free blocks apart by stream and by pool (a CUDA graph's private pools
// beside the default ones), but a trace entry names only a stream and an
// address: streams get ranks in ascending order, and a segment event's pool
// is that of the snapshot's segment at its address.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "allocator/caching_allocator.h"

namespace memsight::alloc {

// A segment (for expandable segments: a mapped range).
struct SegmentRange {
  int64_t start = 0, size = 0, stream = 0;
  bool small = false, expandable = false;
  int64_t pool_id[2] = {0, 0};
  int64_t end() const { return start + size; }
};

struct StreamPoolIndex {
  std::vector<int64_t> streams;              // every stream of the device, ascending
  std::vector<SegmentRange> final_segments;  // at the snapshot, by address

  // A stream's rank: its index among the device's streams.
  uint16_t rank(int64_t stream) const {
    if (streams.size() == 1) return 0;
    return static_cast<uint16_t>(std::lower_bound(streams.begin(), streams.end(), stream) -
                                 streams.begin());
  }
  // The snapshot's segment (mapped range) holding addr, or null.
  const SegmentRange* final_segment_at(int64_t addr) const;
  // A segment event's pool: the snapshot's segment there, else the size's kind.
  uint16_t pool_of(CachingAllocator& a, int64_t addr, int64_t size, bool expandable) const;
  // Whether any segment belongs to a CUDA graph's private pool.
  bool has_private_pools() const;
};

}  // namespace memsight::alloc
