#pragma once
// Pieces of JSON the analyses' reports share (summary, diff, leaks): stacks
// and lists of strings. Their text writes sizes and counts with
// util/text_format.h.
#include <cstdint>
#include <string>
#include <vector>

#include "memsight/frames.h"
#include "util/json_writer.h"

namespace memsight {

// ["a", "b"]
void json_strings(JsonWriter& w, const std::vector<std::string>& v);
// The stack's frames, innermost first, long names cut (cut_name):
// [{"name", "filename", "line", "kind"}, ...].
void json_stack(JsonWriter& w, const FrameClassifier& fc, StackId stack);
// The same, appended to `out` on its own (kept as JSON for a later report).
void json_stack(std::string& out, const FrameClassifier& fc, StackId stack);

}  // namespace memsight
