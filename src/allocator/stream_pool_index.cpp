// A device's streams and pools (see stream_pool_index.h).
#include "allocator/stream_pool_index.h"

namespace memsight::alloc {

const SegmentRange* StreamPoolIndex::final_segment_at(int64_t addr) const {
  auto it = std::upper_bound(final_segments.begin(), final_segments.end(), addr,
                             [](int64_t a, const SegmentRange& r) { return a < r.start; });
  if (it == final_segments.begin()) return nullptr;
  --it;
  return addr < it->end() ? &*it : nullptr;
}

uint16_t StreamPoolIndex::pool_of(CachingAllocator& a, int64_t addr, int64_t size,
                                  bool expandable) const {
  bool small = expandable ? size % kLargeBuffer != 0 : size == kSmallBuffer;
  const SegmentRange* r = final_segment_at(addr);
  if (r && r->small == small && r->expandable == expandable && (expandable || r->start == addr))
    return a.pool_of(small, r->pool_id[0], r->pool_id[1]);
  return a.pool_of(small, 0, 0);
}

bool StreamPoolIndex::has_private_pools() const {
  return std::any_of(final_segments.begin(), final_segments.end(),
                     [](const SegmentRange& r) { return r.pool_id[0] != 0 || r.pool_id[1] != 0; });
}

}  // namespace memsight::alloc
