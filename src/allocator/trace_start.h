#pragma once
// The allocator of one device as its trace began, rebuilt from the snapshot
// (the segments and blocks at the end) with the trace's segment events
// undone, newest first; blocks live then are those whose first event in the
// trace frees them, and those still live at the snapshot that no event
// touches. Both the replay and the simulation start from it.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "allocator/caching_allocator.h"
#include "memsight/snapshot.h"

namespace memsight::alloc {

struct TraceStart {
  struct Range {  // a segment (for expandable segments: a mapped range)
    int64_t start = 0, size = 0, stream = 0;
    bool small = false, expandable = false;
    int64_t pool_id[2] = {0, 0};
    int64_t end() const { return start + size; }
  };
  struct Live {  // a block live when the trace began
    int64_t addr = 0, size = 0, requested = 0;
    StackId stack = 0;
    bool pending = false;    // freed before, waiting for other streams' events
    bool estimated = false;  // size estimated from the request (its allocation is not in the trace)
    uint32_t request = 0;
  };
  struct Final {  // a block live at the snapshot
    int64_t size = 0, requested = 0;
    StackId stack = 0;
    bool pending = false;
  };
  uint32_t begin = 0, end = 0;         // the device's trace rows
  std::vector<uint32_t> segment_rows;  // rows of segment events (alloc, free, map, unmap)
  std::vector<int64_t> streams;        // every stream of the device, ascending: a stream's rank
  std::vector<Range> ranges;           // at the start, by address
  std::vector<Range> final_ranges;     // at the snapshot, by address
  std::vector<Live> live;              // at the start, by address
  std::unordered_map<int64_t, Final> final_live;
  int64_t estimated = 0;  // blocks of `live` whose size is estimated
  uint32_t allocs = 0;    // alloc entries in the trace
  // The block each alloc and free entry is about, by request: the alloc
  // entries in order, then the blocks of `live` (kNoRequest: other entries).
  static constexpr uint32_t kNoRequest = UINT32_MAX;
  Column<uint32_t> request;  // by entry of the device
  uint32_t requests = 0;
  int64_t space_size = 0;  // an expandable segment's address space

  uint16_t rank(int64_t stream) const {
    if (streams.size() == 1) return 0;
    return static_cast<uint16_t>(std::lower_bound(streams.begin(), streams.end(), stream) -
                                 streams.begin());
  }
  // The snapshot's segment (mapped range) holding addr, or null.
  const Range* final_range_at(int64_t addr) const;
  // A segment event's pool: the snapshot's segment there, else the size's kind.
  uint16_t pool_of(CachingAllocator& a, int64_t addr, int64_t size, bool expandable) const;
};

// device_total: the device's memory (bytes; <= 0 unknown), which sizes the
// address space of expandable segments as torch does.
TraceStart trace_start(const Snapshot& snap, size_t device, const Settings& s,
                       int64_t device_total);

// Loads the start into `a`: segments, the address spaces of expandable
// segments, and the live blocks; on_live(block, live) for each.
void load_start(CachingAllocator& a, const Snapshot& snap, const TraceStart& ts,
                const std::function<void(uint32_t, const TraceStart::Live&)>& on_live);

}  // namespace memsight::alloc
