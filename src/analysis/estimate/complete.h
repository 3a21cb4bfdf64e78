#pragma once
// A requests-only history made whole (memsight/estimate.h): one device's
// simulated run and the completed trace and segments made from it. The
// trace keeps every entry of the history in order, with the segment events
// the simulation took inserted right before the request that took them,
// each block at its simulated address, and torch's oom entry where the run
// ran out of memory (the history ends there, as a recording that died
// would); the segments are the allocator's as the run ended.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "allocator/simulate.h"
#include "memsight/snapshot.h"

namespace memsight::estimate {

struct DeviceRun {
  size_t device = 0;
  simulate::Plan plan;
  simulate::Device memory;
  simulate::Result result;
  simulate::Trail trail;
  int64_t oom_row = -1;     // the oom entry in the completed device trace (-1: none)
  int64_t device_free = 0;  // what it records free on the device
  // The blocks live as the run ended, by their address in the history:
  // start -> (end, simulated address). Tags follow their storages by it.
  std::map<int64_t, std::pair<int64_t, int64_t>> live;
};

// A model holding `in`'s strings, frames, shapes and top-level values (ids
// stay the same), and no trace nor segment yet.
Snapshot copy_tables(const Snapshot& in);

// The completed trace of every device of `in` (devices without a run keep
// theirs), into `out` (from copy_tables(in)); fills each run's oom_row,
// device_free and live.
void complete_trace(const Snapshot& in, std::vector<DeviceRun>& runs, Snapshot& out);

// The segments and blocks of every run's allocator as it ended.
void complete_segments(const Snapshot& in, const std::vector<DeviceRun>& runs, Snapshot& out);

}  // namespace memsight::estimate
