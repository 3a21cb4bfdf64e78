#pragma once
// `memsight whatif` for embedders (the Python module): each device's
// recorded requests through the simulated caching allocator under other
// settings, after the self-check under the recorded ones (docs/whatif.md).
#include <cstdint>
#include <string>
#include <utility>

#include "memsight/snapshot.h"

namespace memsight {

struct WhatifRequest {
  // Settings as PYTORCH_CUDA_ALLOC_CONF takes them ("expandable_segments:True",
  // joined by commas), over the recorded ones; empty: the standard alternatives.
  std::string set;
  int64_t device_memory = -1;  // the device's total memory in bytes; -1: as recorded
  double memory_fraction = 0;  // what the job passed to set_per_process_memory_fraction; 0: unknown
};

// The report as the CLI prints it: (text, JSON). Throws Error for settings
// that cannot be simulated.
std::pair<std::string, std::string> whatif_text_and_json(const Snapshot& snap,
                                                         const WhatifRequest& req);

}  // namespace memsight
