#pragma once
// A moment of a device's trace as the CLI and Python name it: "peak" (the
// allocated peak), "snapshot" (the end of the trace), "oom" (the first
// OOM), "oom:K" (the K-th, from 0), "step:N" (the start of iteration N, as
// find_iterations numbers them) or a trace entry index ("205": the state
// after it; "-1": before the first).
#include <cstdint>
#include <string>
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
// Why `device` is not one of the `named` ("the snapshot has no device 2: it
// lists devices 0 to 1", "... it lists no device at all").
std::string no_such_device(int64_t device, size_t named);

}  // namespace memsight
