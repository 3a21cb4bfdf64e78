#pragma once
// Splitting text into lines without copying it.
#include <string_view>

namespace memsight {

// Calls f(line) for each '\n'-terminated line of `text`, the newline left
// out; a last line without one counts too.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    f(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
}

}  // namespace memsight
