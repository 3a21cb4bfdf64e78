#pragma once
// One device's trace, read once for the allocator's two drivers (the
// replay and the simulation): its rows, the block each alloc and free entry
// is about (its request), the allocator's state when the trace began
// (trace_start.h) and the index of the device's streams and pools
// (stream_pool_index.h). One pass over the trace finds the requests, the
// blocks live at the start and the streams together.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "allocator/stream_pool_index.h"
#include "allocator/trace_start.h"
#include "memsight/snapshot.h"

namespace memsight::alloc {

struct DeviceTrace {
  uint32_t begin = 0, end = 0;         // the device's trace rows
  std::vector<uint32_t> segment_rows;  // rows of segment events (alloc, free, map, unmap)
  // The block each alloc and free entry is about, by request: the alloc
  // entries in order, then the blocks of start.live (kNoRequest: other entries).
  static constexpr uint32_t kNoRequest = UINT32_MAX;
  Column<uint32_t> request;  // by entry of the device
  uint32_t requests = 0;
  uint32_t allocs = 0;  // alloc entries in the trace
  TraceStart start;
  StreamPoolIndex index;
  // A block live at the snapshot: what the replay must end with.
  struct FinalBlock {
    int64_t size = 0, requested = 0;
    StackId stack = 0;
    bool pending = false;
  };
  std::unordered_map<int64_t, FinalBlock> final_live;  // by address
};

// The trace entry a reserved peak is told at, one rule for the replay's
// peak (summary) and the simulation's (whatif): a segment made for a request
// counts at that request. torch records segment_alloc (or segment_map)
// just before the alloc it serves; a simulation makes it inside the request.
// `event` is within the device's rows [begin, end).
int64_t reserved_peak_entry(const TraceTable& t, uint32_t begin, uint32_t end, int64_t event);

// device_total: the device's memory (bytes; <= 0 unknown), which sizes the
// address space of expandable segments as torch does.
DeviceTrace read_device_trace(const Snapshot& snap, size_t device, const Settings& s,
                              int64_t device_total);

}  // namespace memsight::alloc
