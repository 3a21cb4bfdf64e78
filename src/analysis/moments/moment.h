#pragma once
// A moment of a device's trace as the CLI and Python name it: "peak" (the
// allocated peak), "snapshot" (the end of the trace), "oom" (the first
// OOM), "oom:K" (the K-th, from 0), "step:N" (the start of iteration N, as
// find_iterations numbers them) or a trace entry index ("205": the state
// after it; "-1": before the first).
#include <cstdint>
#include <string_view>

#include "allocator/replay.h"
#include "memsight/snapshot.h"

namespace memsight {

// The trace entry whose state the moment is (-1: before the first). Throws
// Error for a moment the device does not have.
int64_t moment_event(const Snapshot& snap, size_t device, const replay::Result& rr,
                     std::string_view at);

// The devices a snapshot names: its traces and the devices of its segments.
size_t devices_named(const Snapshot& snap);

}  // namespace memsight
