#pragma once
// The text tools of torch.cuda._memory_viz, byte for byte: each returns what
// the torch function returns (the CLI prints it with one more newline, as
// torch's CLI does).

#include <string>

#include "memsight/snapshot.h"

namespace memsight {

// torch's _format_size: "976.6KiB", "2.0MiB", "0.0B".
std::string format_size(double num);

std::string segsum(const Snapshot& snap);           // `stats`
std::string trace_text(const Snapshot& snap);       // `trace`
std::string folded_memory(const Snapshot& snap);    // `memory` (folded stacks)
std::string folded_segments(const Snapshot& snap);  // `segments` (folded stacks)

struct Comparison {
  std::string stdout_text;  // "only_before = [...]\nonly_after = [...]\n"
  std::string folded;       // folded stacks of the segments only in one side
};
Comparison compare(const Snapshot& before, const Snapshot& after);

}  // namespace memsight
