#include "analysis/frames/report_text.h"

#include "memsight/input_limits.h"

namespace memsight {

void json_strings(JsonWriter& w, const std::vector<std::string>& v) {
  w.begin_array();
  for (const std::string& s : v) w.value(s);
  w.end_array();
}

void json_stack(JsonWriter& w, const FrameClassifier& fc, StackId stack) {
  const Snapshot& snap = fc.snapshot();
  w.begin_array();
  for (FrameId id : snap.frames.stack(stack)) {
    const Frame& f = snap.frames.frame(id);
    w.begin_object()
        .field("name", cut_name(snap.str(f.name)))
        .field("filename", cut_name(snap.str(f.filename)))
        .field("line", f.line)
        .field("kind", frame_kind_name(fc.kind(id)))
        .end_object();
  }
  w.end_array();
}

void json_stack(std::string& out, const FrameClassifier& fc, StackId stack) {
  JsonWriter w(out);
  json_stack(w, fc, stack);
}

}  // namespace memsight
