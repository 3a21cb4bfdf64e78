#pragma once
// `memsight whatif` for embedders (the Python module): each device's
// recorded requests through the simulated caching allocator under other
// settings, after the self-check under the recorded ones (docs/whatif.md).
#include <cstdint>
#include <string>
#include <utility>

#include "memsight/snapshot.h"

namespace memsight {

// What the allocator simulation says of one recorded out-of-memory error:
// whether another allocator setting lets its request fit, and what reserved
// memory peaks at then. `memsight summary` cites it in the OOM's diagnosis.
struct SimulatedFix {
  enum class Verdict : uint8_t {
    Fits,             // `settings` lets the request fit
    FitsNearCapHigh,  // only with a cap near the top of what the recording allows
    NoneFits,         // none of the standard settings does
  };
  Verdict verdict = Verdict::NoneFits;
  std::string settings;       // as PYTORCH_CUDA_ALLOC_CONF takes it, or "defaults"
  int64_t peak_reserved = 0;  // with `settings` (Fits)
  int64_t recorded_peak = 0;  // under the recorded settings, simulated
  // The cap was not recorded: simulated from cap_low up to cap_high, the
  // range the recording allows.
  bool cap_inferred = false;
  int64_t cap_low = 0, cap_high = 0;
  // False when the simulation has a complete history and still does not
  // reproduce the recording (whatif's self-check says how).
  bool reproduces = true;
  // The history ends at this OOM: the peak is the recorded part's, and
  // allocated memory grew by `growth` over the last `growth_window` entries
  // (steps, with by_steps) before it; where steadily, the setting that fits
  // moves the OOM about `postponed_by` entries (steps) later (-1: unknown).
  bool recording_ends = false;
  int64_t growth = 0, growth_window = 0, postponed_by = -1;
  bool growth_steady = false, by_steps = false;
  bool operator==(const SimulatedFix&) const = default;
};

struct WhatifRequest {
  // Settings as PYTORCH_CUDA_ALLOC_CONF takes them ("expandable_segments:True",
  // joined by commas), over the recorded ones; empty: the standard alternatives.
  std::string set;
  int64_t device_memory = -1;  // the device's total memory in bytes; -1: as recorded
  double memory_fraction = 0;  // what the job passed to set_per_process_memory_fraction; 0: unknown
};

// The device's memory as a user gives it (`--device-memory`, the Python
// API's device_memory): a size with a unit ("80G", "80GiB") or bytes.
// Throws Error naming `what` for anything else and below 1 MiB, where a unit
// was surely left out ("80" is 80 bytes; no GPU is that small).
int64_t parse_device_memory(const std::string& text, const std::string& what);

// The recorded job's per-process memory fraction as a user gives it
// (`--memory-fraction`): a number in (0.0, 1.0]. Throws Error naming `what`
// and the text otherwise; check_memory_fraction is the same rule on a number
// (`typed`: how the user wrote it).
double parse_memory_fraction(const std::string& text, const std::string& what);
double check_memory_fraction(double fraction, const std::string& typed, const std::string& what);

// The report as the CLI prints it: (text, JSON). Throws Error for settings
// that cannot be simulated.
std::pair<std::string, std::string> whatif_text_and_json(const Snapshot& snap,
                                                         const WhatifRequest& req);

}  // namespace memsight
