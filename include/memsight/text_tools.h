#pragma once
// The text tools of torch.cuda._memory_viz, byte for byte: each returns what
// the torch function returns (the CLI prints it with one more newline, as
// torch's CLI does).

#include <cstdint>
#include <string>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight {

// torch's _format_size: "976.6KiB", "2.0MiB", "0.0B". The text tools use
// it, to print what torch prints.
std::string format_size(double num);
// memsight's own reports and pages: the same style, the unit chosen after
// rounding, so that one value is never both "1.0TiB" and "1024.0GiB"
// ("1024.0GiB" is torch's for 1023.96 GiB). Defined with memsight's other
// text helpers, in the lowest layer (util/text_format.h).
std::string format_bytes(double num);

std::string segsum(const Snapshot& snap);           // `stats`
std::string trace_text(const Snapshot& snap);       // `trace`
std::string folded_memory(const Snapshot& snap);    // `memory` (folded stacks)
std::string folded_segments(const Snapshot& snap);  // `segments` (folded stacks)

// Folded stacks as data: the torch-identical text, and where each line's
// stack lies in it with its count, so a renderer never re-parses the text
// (a frame name may hold a newline or a space).
struct FoldedLine {
  size_t begin = 0, size = 0;  // the stack: text.substr(begin, size)
  int64_t count = 0;           // negative for torch's "<gaps>" of stale sizes
};
struct Folded {
  std::string text;
  std::vector<FoldedLine> lines;
};
Folded folded_memory_lines(const Snapshot& snap);
Folded folded_segments_lines(const Snapshot& snap);

struct Comparison {
  std::string stdout_text;               // "only_before = [...]\nonly_after = [...]\n"
  std::string folded;                    // folded stacks of the segments only in one side
  std::vector<FoldedLine> folded_lines;  // their lines, as in Folded
};
Comparison compare(const Snapshot& before, const Snapshot& after);

}  // namespace memsight
