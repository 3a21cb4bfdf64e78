#pragma once
// torch's CUDA caching allocator simulated on a recorded history: the
// recorded requests (alloc sizes and streams, frees, record_stream-delayed
// frees, empty_cache calls, CUDA graphs' private pools) go through the
// allocator's own decisions under any settings (alloc_rules.h): best fit
// with splitting, max_split_size and oversize blocks, new segments or
// expandable segments' pages, freeing cached blocks and retrying when a
// segment does not fit, garbage collection under a memory fraction, and
// out-of-memory. Under the recorded settings it must make the decisions the
// recording shows (the self-check, whatif.h); the replay (replay.h) moves
// the same CachingAllocator with every decision taken from the record.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "allocator/caching_allocator.h"
#include "allocator/device_trace.h"
#include "memsight/snapshot.h"

namespace memsight::simulate {

// The memory the allocator could get. -1: unknown (no bound).
struct Device {
  int64_t total = -1;     // the device's memory (torch.cuda.mem_get_info()'s total)
  int64_t capacity = -1;  // what cudaMalloc can reach: reserved + free on the device
  int64_t limit = -1;     // allowed_memory_maximum under set_per_process_memory_fraction
  // How the limit was known from a recorded OOM: between limit and limit_high.
  int64_t limit_high = -1;
  bool limit_inferred = false;
  bool operator==(const Device&) const = default;
};

// A segment event: segment_alloc / segment_free / segment_map / segment_unmap.
struct SegmentEvent {
  Action action = Action::SegmentAlloc;
  int64_t addr = 0, size = 0;
  int32_t owner = 0;  // the trace entry it served (the request, or the one after an empty_cache)
  bool operator==(const SegmentEvent& o) const {
    return action == o.action && size == o.size && owner == o.owner;
  }
};

// What a device's trace asks of the allocator, read once for every simulation.
struct Plan {
  enum Row : uint8_t {
    kIgnore,
    kAlloc,          // a request
    kOom,            // a request that failed in the recording
    kFree,           // free_requested and, next, its free_completed
    kFreeRequested,  // the block waits for other streams (record_stream)
    kFreeCompleted,
    kFreeAfter,   // completed by the next request's release of cached blocks
    kEmptyCache,  // the first segment release of a torch.cuda.empty_cache() call
  };
  size_t device = 0;
  alloc::DeviceTrace trace;
  std::vector<Row> rows;  // by trace entry of the device (requests: trace.request)
  std::vector<std::pair<uint32_t, uint16_t>> private_rows;  // (entry, index into pool_ids)
  std::vector<std::pair<int64_t, int64_t>> pool_ids;
  std::vector<SegmentEvent> recorded;  // the recorded segment events, with owners
  std::vector<int32_t> recorded_ooms;  // trace entries
  int64_t recorded_peak_reserved = 0;
  int32_t recorded_peak_reserved_event = -1;
  int64_t start_reserved = 0;
  Device device_recorded;  // what the recording says of the device
  // Why the history is not complete ("" when it is): then the simulation
  // starts from an estimated state.
  std::string incomplete;
};

Plan plan(const Snapshot& snap, size_t device);

struct Oom {
  int32_t event = 0;      // trace entry of the request
  int64_t requested = 0;  // rounded size
  int64_t reserved = 0, allocated = 0;
  alloc::FreeSpace free;  // cached free memory then
  bool recorded = false;  // the recording failed here too
  bool cap = false;       // refused by the limit (else the device's capacity)
  bool operator==(const Oom&) const = default;
};

struct Result {
  alloc::Counters peak;
  int32_t peak_reserved_event = -1, peak_allocated_event = -1;
  // While reserved memory stood at its peak: the fewest reserved bytes not
  // allocated, and the largest free block then.
  // Blocks live when the trace began in segments the snapshot does not
  // record are allocated outside reserved memory: unused counts the
  // recorded segments only, and `outside_at_peak` says what they held then.
  int64_t unused_at_peak = 0, largest_free_at_peak = 0, outside_at_peak = 0;
  std::vector<SegmentEvent> events;
  std::vector<Oom> ooms;         // the last one ends the run unless it was recorded
  std::vector<int32_t> avoided;  // recorded OOMs whose request fit
  int32_t stopped_at = -1;       // a new OOM's entry: the job would have died there
  int64_t segments_created = 0;  // segment_alloc and segment_map events
  // cudaMalloc segments made while the recording had no cudaMalloc address
  // at all to start the layout from (no such segment at the start nor in
  // the trace, as when it was recorded with expandable segments): every one
  // sits where the model of the driver puts it.
  int64_t segments_placed_unanchored = 0;
  // Requests served at another address than the recorded one (with the
  // recording's segments at their recorded addresses, the same decisions
  // put every block where torch put it).
  int64_t misplaced = 0;
  bool operator==(const Result&) const = default;
};

struct Inputs {
  alloc::Settings settings;
  Device device;
  bool keep_events = true;  // list the segment events (for the self-check)
  static Inputs recorded(const Snapshot& snap, const Plan& p);
};

Result run(const Snapshot& snap, const Plan& p, const Inputs& in);

// What a run leaves behind for making a history whole (analysis/estimate):
// where each request's block went and the allocator as the run ended (at
// the request that ran out of memory, if one did). Kept only when asked
// for, so whatif's runs stay as they were.
struct Trail {
  std::vector<int64_t> addresses;  // by request (DeviceTrace::request); -1: never served
  std::optional<alloc::CachingAllocator> end;
};
Result run(const Snapshot& snap, const Plan& p, const Inputs& in, Trail* trail);

}  // namespace memsight::simulate
