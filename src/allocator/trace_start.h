#pragma once
// The allocator of one device as its trace began: the segments then (the
// snapshot's, with the trace's segment events undone, newest first) and
// the blocks live then (those whose first event in the trace frees them,
// and those still live at the snapshot that no event touches; found with
// the trace's requests, device_trace.h). Both the replay and the
// simulation start from it.
#include <cstdint>
#include <functional>
#include <vector>

#include "allocator/caching_allocator.h"
#include "allocator/stream_pool_index.h"
#include "memsight/snapshot.h"

namespace memsight::alloc {

// A block live when the trace began.
struct LiveBlock {
  int64_t addr = 0, size = 0, requested = 0;
  StackId stack = 0;
  bool pending = false;    // freed before, waiting for other streams' events
  bool estimated = false;  // size estimated from the request (its allocation is not in the trace)
  uint32_t request = 0;
};

struct TraceStart {
  std::vector<SegmentRange> segments;  // by address
  std::vector<LiveBlock> live;         // by address
  int64_t estimated = 0;               // blocks of `live` whose size is estimated
  int64_t space_size = 0;              // an expandable segment's address space
};

// torch reserves 1 1/8 of the device's memory (bytes; <= 0: unknown, taken
// as 80 GiB) of address space per expandable segment.
int64_t expandable_space_size(int64_t device_total);

// Whether the rows [begin, end) record only allocations: no segment event
// and no free. With memory reserved when they begin, that is a state-only
// snapshot: what it shows was made before recording, and neither what-if nor
// leaks has a history to go on.
bool allocations_only(const TraceTable& t, uint32_t begin, uint32_t end);

// The rows of [begin, end) holding segment events (alloc, free, map, unmap).
std::vector<uint32_t> segment_rows(const TraceTable& t, uint32_t begin, uint32_t end);

// The segments at the start: the snapshot's (`final_segments`, by address)
// with the segment events at `rows` undone, newest first.
std::vector<SegmentRange> segments_at_start(const TraceTable& t, const std::vector<uint32_t>& rows,
                                            const std::vector<SegmentRange>& final_segments);

// Loads the start into `a`: the address spaces of expandable segments (those
// mapped at the start and at the map events of `segment_rows`), segments,
// and the live blocks; on_live(block, live) for each.
void load_start(CachingAllocator& a, const TraceTable& t, const TraceStart& start,
                const StreamPoolIndex& index, const std::vector<uint32_t>& segment_rows,
                const std::function<void(uint32_t, const LiveBlock&)>& on_live);

}  // namespace memsight::alloc
