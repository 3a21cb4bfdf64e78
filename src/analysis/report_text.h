#pragma once
// Pieces of text and JSON the analyses' reports share (summary, diff,
// leaks): sizes as torch prints them, wrapped paragraphs, stacks as JSON.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/frames.h"

namespace memsight {

// torch's size format ("1.5GiB"), of an integer count of bytes.
std::string size_text(int64_t bytes);
// Words of `text` in lines of at most `width` columns, each line indented.
std::string wrapped(std::string_view text, const std::string& indent, size_t width = 100);
// ["a", "b"]
void json_strings(std::string& out, const std::vector<std::string>& v);
// The stack's frames, innermost first:
// [{"name", "filename", "line", "kind"}, ...].
void json_stack(std::string& out, const FrameClassifier& fc, StackId stack);

}  // namespace memsight
