#pragma once
// Splitting text into lines without copying it.
#include <string>
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

// The words of `text` in lines of at most `width` columns, each line
// starting with `indent`.
inline std::string wrap_words(std::string_view text, const std::string& indent,
                              size_t width = 100) {
  std::string out, line;
  while (!text.empty()) {
    size_t sp = text.find(' ');
    std::string_view word = text.substr(0, sp);
    text = sp == std::string_view::npos ? std::string_view() : text.substr(sp + 1);
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) {
      out += indent + line + '\n';
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty()) out += indent + line + '\n';
  return out;
}

}  // namespace memsight
