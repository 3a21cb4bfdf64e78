#pragma once
// The allocator's snapshot as the native dumper hands it over (flat arrays,
// python/memsight/torch/native/raw_snapshot.h) -> the snapshot model, laid
// out key for key as torch's own snapshot of the same state, so that the
// writer produces the pickle torch.cuda.memory._dump_snapshot would.

#include "memsight/snapshot.h"

struct memsight_raw_snapshot;

namespace memsight {

// Throws memsight::Error when the arrays are inconsistent (an id out of
// range, a block range past the blocks, another ABI version).
Snapshot snapshot_from_raw(const memsight_raw_snapshot& raw);

}  // namespace memsight
