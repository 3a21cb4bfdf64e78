#pragma once
// Pieces of text and JSON the analyses' reports share (summary, diff,
// leaks): sizes as torch prints them, stacks as JSON.
#include <cstdint>
#include <string>
#include <vector>

#include "memsight/frames.h"
#include "util/json_writer.h"

namespace memsight {

// torch's size format ("1.5GiB"), of an integer count of bytes.
std::string size_text(int64_t bytes);
// "trace entry" for one, "trace entries" for any other count.
inline const char* entries_word(int64_t n) { return n == 1 ? " trace entry" : " trace entries"; }
// ["a", "b"]
void json_strings(JsonWriter& w, const std::vector<std::string>& v);
// The stack's frames, innermost first, long names cut (cut_name):
// [{"name", "filename", "line", "kind"}, ...].
void json_stack(JsonWriter& w, const FrameClassifier& fc, StackId stack);
// The same, appended to `out` on its own (kept as JSON for a later report).
void json_stack(std::string& out, const FrameClassifier& fc, StackId stack);

}  // namespace memsight
