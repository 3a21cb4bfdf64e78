#pragma once
// The snapshot's annotations as time ranges, one device at a time: the
// record_function and profiler-step scopes torch records in the top-level
// `external_annotations` list (torch >= 2.5: {stage: START|END, name,
// device, time_us}) and, from older recordings, `user_defined` trace
// entries (a START or END frame whose filename is the name). The page draws
// them as labelled ranges and markers on every timeline.
#include <cstdint>
#include <string_view>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight::report {

struct AnnotationRanges {
  std::vector<std::string_view> name;  // the snapshot's text
  // Microseconds since the epoch; -1 where the recording holds no START (the
  // scope began before it) or no END (still open at the snapshot).
  std::vector<int64_t> start, end;
};

// Ranges of `device`, in order of their start (open starts first). An END
// closes the latest open START of the same name.
AnnotationRanges annotation_ranges(const Snapshot& snap, size_t device);

}  // namespace memsight::report
