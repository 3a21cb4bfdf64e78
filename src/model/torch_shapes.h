#pragma once
// The key orders torch writes a segment and a block in, and the strings of
// their kinds and states, interned once in a snapshot: for the writers that
// make segments themselves (the native dumper's arrays, a completed
// estimate), so that what they write reads back as torch's own.
#include "memsight/snapshot.h"

namespace memsight {

struct TorchSegmentShapes {
  // A segment with a stack ends "blocks", "frames"; one without, "frames", "blocks".
  ShapeId with_stack = 0, without_stack = 0, block = 0;
  StrId large = 0, small = 0;
  StrId states[3] = {0, 0, 0};  // active_allocated, active_pending_free, inactive
  explicit TorchSegmentShapes(Snapshot& snap);
};

}  // namespace memsight
