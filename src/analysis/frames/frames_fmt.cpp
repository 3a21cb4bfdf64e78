#include "analysis/frames/frames_fmt.h"

namespace memsight {

namespace {

bool keep_name(std::string_view name) {
  static constexpr std::string_view kNames[] = {"unwind::unwind",    "CapturedTraceback::gather",
                                                "gather_with_cpp",   "_start",
                                                "__libc_start_main", "PyEval_",
                                                "PyObject_",         "PyFunction_"};
  for (auto n : kNames)
    if (name.find(n) != std::string_view::npos) return false;
  return true;
}

bool keep_file(std::string_view filename) {
  static constexpr std::string_view kFiles[] = {"core/boxing",
                                                "/Register",
                                                "/Redispatch",
                                                "pythonrun.c",
                                                "Modules/main.c",
                                                "Objects/call.c",
                                                "Objects/methodobject.c",
                                                "pycore_ceval.h",
                                                "ceval.c",
                                                "cpython/abstract.h"};
  for (auto f : kFiles)
    if (filename.find(f) != std::string_view::npos) return false;
  return true;
}

}  // namespace

bool keep_frame(std::string_view name, std::string_view filename) {
  return keep_name(name) && keep_file(filename);
}

namespace {
enum : uint8_t { kLooked = 1, kDropped = 2, kSemicolon = 4 };
}

bool FoldedFrames::kept(FrameId id) {
  const Frame& f = snap_.frames.frame(id);
  uint8_t& n = name_[f.name];
  if (!n) {
    std::string_view name = snap_.str(f.name);
    n = kLooked | (keep_name(name) ? 0 : kDropped) |
        (name.find(';') != std::string_view::npos ? kSemicolon : 0);
  }
  if (n & kDropped) return false;
  uint8_t& file = file_[f.filename];
  if (!file) file = kLooked | (keep_file(snap_.str(f.filename)) ? 0 : kDropped);
  return !(file & kDropped);
}

const FoldedFrames::Base& FoldedFrames::base(StrId file) {
  auto [it, added] = base_.try_emplace(file, Base{0, false, 0});
  if (added) {
    std::string_view s = snap_.str(file);
    auto slash = s.rfind('/');
    it->second.at = slash == std::string_view::npos ? 0 : slash + 1;
    it->second.semicolon = s.find(';', it->second.at) != std::string_view::npos;
    it->second.hash = Label::hash_text(s.substr(it->second.at));
  }
  return it->second;
}

Label FoldedFrames::label(FrameId id) {
  const Frame& f = snap_.frames.frame(id);
  const Base& b = base(f.filename);
  auto [nh, added] = name_hash_.try_emplace(f.name, 0);
  if (added) nh->second = Label::hash_text(snap_.str(f.name));
  Label l;
  return l.add(snap_.str(f.filename).substr(b.at), b.hash)
      .add(":")
      .add(f.line)
      .add(":")
      .add(snap_.str(f.name), nh->second);
}

bool FoldedFrames::label_has_semicolon(FrameId id) {
  const Frame& f = snap_.frames.frame(id);
  kept(id);  // looks at the name
  return (name_[f.name] & kSemicolon) || base(f.filename).semicolon;
}

void append_frame(std::string& out, std::string_view name, std::string_view filename,
                  std::string_view line, size_t max_piece) {
  auto slash = filename.rfind('/');
  append_cut_name(out, slash == std::string_view::npos ? filename : filename.substr(slash + 1),
                  max_piece);
  out += ':';
  out += line;
  out += ':';
  append_cut_name(out, name, max_piece);
}

void StackFormatter::append(std::string& out, StackId s) {
  auto it = cache_.find(s);
  if (it != cache_.end()) {
    out += it->second;
    return;
  }
  size_t begin = out.size();
  const Snapshot& snap = frames_.snapshot();
  auto frames = snap.frames.stack(s);
  if (frames.empty()) {
    out += "<non-python>";
  } else {
    bool first = true;
    for (size_t i = frames.size(); i-- > 0;) {
      if (!frames_.kept(frames[i])) continue;
      const Frame& f = snap.frames.frame(frames[i]);
      if (!first) out += ';';
      first = false;
      append_frame(out, snap.str(f.name), snap.str(f.filename), std::to_string(f.line), max_piece_);
    }
  }
  if (out.size() - begin <= kCacheMax) cache_.emplace(s, out.substr(begin));
}

}  // namespace memsight
