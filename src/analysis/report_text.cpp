#include "analysis/report_text.h"

#include "memsight/text_tools.h"
#include "util/escape.h"

namespace memsight {

std::string size_text(int64_t bytes) { return format_size(static_cast<double>(bytes)); }

std::string wrapped(std::string_view text, const std::string& indent, size_t width) {
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

void json_strings(std::string& out, const std::vector<std::string>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, v[i]);
  }
  out += ']';
}

void json_stack(std::string& out, const FrameClassifier& fc, StackId stack) {
  const Snapshot& snap = fc.snapshot();
  out += '[';
  bool first = true;
  for (FrameId id : snap.frames.stack(stack)) {
    const Frame& f = snap.frames.frame(id);
    if (!first) out += ',';
    first = false;
    out += "{\"name\":";
    append_json_string(out, snap.str(f.name));
    out += ",\"filename\":";
    append_json_string(out, snap.str(f.filename));
    out += ",\"line\":" + std::to_string(f.line) + ",\"kind\":\"";
    out += frame_kind_name(fc.kind(id));
    out += "\"}";
  }
  out += ']';
}

}  // namespace memsight
