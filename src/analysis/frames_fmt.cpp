#include "analysis/frames_fmt.h"

namespace memsight {

bool keep_frame(std::string_view name, std::string_view filename) {
  static constexpr std::string_view kNames[] = {"unwind::unwind",    "CapturedTraceback::gather",
                                                "gather_with_cpp",   "_start",
                                                "__libc_start_main", "PyEval_",
                                                "PyObject_",         "PyFunction_"};
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
  for (auto n : kNames)
    if (name.find(n) != std::string_view::npos) return false;
  for (auto f : kFiles)
    if (filename.find(f) != std::string_view::npos) return false;
  return true;
}

void append_frame(std::string& out, std::string_view name, std::string_view filename,
                  std::string_view line) {
  auto slash = filename.rfind('/');
  out += slash == std::string_view::npos ? filename : filename.substr(slash + 1);
  out += ':';
  out += line;
  out += ':';
  out += name;
}

const std::string& StackFormatter::fragment(StackId s) {
  auto it = cache_.find(s);
  if (it != cache_.end()) return it->second;
  std::string out;
  auto frames = snap_.frames.stack(s);
  if (frames.empty()) {
    out = "<non-python>";
  } else {
    bool first = true;
    for (size_t i = frames.size(); i-- > 0;) {
      const Frame& f = snap_.frames.frame(frames[i]);
      auto name = snap_.str(f.name), file = snap_.str(f.filename);
      if (!keep_frame(name, file)) continue;
      if (!first) out += ';';
      first = false;
      append_frame(out, name, file, std::to_string(f.line));
    }
  }
  return cache_.emplace(s, std::move(out)).first->second;
}

}  // namespace memsight
