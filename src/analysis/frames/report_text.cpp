#include "analysis/frames/report_text.h"

#include "memsight/input_limits.h"
#include "memsight/text_tools.h"
#include "util/escape.h"

namespace memsight {

std::string size_text(int64_t bytes) { return format_size(static_cast<double>(bytes)); }

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
    append_json_string(out, cut_name(snap.str(f.name)));
    out += ",\"filename\":";
    append_json_string(out, cut_name(snap.str(f.filename)));
    out += ",\"line\":" + std::to_string(f.line) + ",\"kind\":\"";
    out += frame_kind_name(fc.kind(id));
    out += "\"}";
  }
  out += ']';
}

}  // namespace memsight
