#pragma once
// `memsight estimate`: a requests-only history (the allocations and frees
// of a step run without a GPU, memsight.torch.estimate's snapshot: no
// segments, no segment events, blocks at fake addresses) made whole by the
// simulated caching allocator: every segment event it takes, every block at
// the address it gets, the segments as the run ends (or where it runs out of
// memory, with torch's oom entry there), so that every command reads it as
// a recording (docs/estimate.md).
#include <cstdint>
#include <string>

#include "memsight/snapshot.h"

namespace memsight {

struct EstimateRequest {
  // Allocator settings as PYTORCH_CUDA_ALLOC_CONF takes them, over those the
  // snapshot names (torch's defaults when it names none); also
  // per_process_memory_fraction:F.
  std::string set;
  int64_t device_memory = -1;  // the device's memory in bytes; -1: no bound
  double memory_fraction = 0;  // set_per_process_memory_fraction; 0: none
};

struct Estimated {
  Snapshot snapshot;  // the completed history
  // The answer as the CLI prints it: peaks, fragmentation, fits or runs
  // out, and the what-if table of the standard alternatives.
  std::string text, json;
};

// Throws Error when the snapshot is not requests-only (it holds segments or
// segment events) or the settings cannot be simulated.
Estimated complete_estimate(const Snapshot& requests, const EstimateRequest& req);

}  // namespace memsight
