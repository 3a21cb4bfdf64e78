#pragma once
// Free memory at a moment of the replay, split into the CUDA graphs' private
// pools and the rest. A private pool's free blocks serve only its graph's
// replays: no other request can take them, so they are neither the cache a
// request could use nor fragmentation (docs/summary.md, "graph pools").
// The replay's totals count them with the rest; this finds them again from
// the segments at the moment and the blocks live then.
#include <cstdint>

#include "allocator/replay.h"
#include "memsight/snapshot.h"

namespace memsight {

struct GraphPoolFree {
  bool pools = false;             // the device has a private pool (else nothing below is set)
  int64_t bytes = 0, blocks = 0;  // free inside private pools
  // The largest free block outside private pools, by pool kind.
  int64_t outside_largest_small = 0, outside_largest_large = 0;
};

// At `event` (-1: before the first entry) of `device`'s replay `rr`.
GraphPoolFree graph_pool_free(const Snapshot& snap, size_t device, const replay::Result& rr,
                              int64_t event);

}  // namespace memsight
