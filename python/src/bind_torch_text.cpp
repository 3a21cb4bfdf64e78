// torch's formats and the flamegraphs: segsum, the trace, folded stacks,
// compare, SVGs, and sizes as torch and memsight print them.
#include <pybind11/stl.h>

#include "binding.h"
#include "memsight/flamegraph.h"
#include "memsight/text_tools.h"
#include "util/text_format.h"

namespace memsight::py_binding {
namespace {

// The reverse of folded_with_stacks: stacks from the package, laid out as
// one text with spans.
Folded folded_of(const py::iterable& stacks) {
  Folded f;
  for (const py::handle& item : stacks) {
    auto pair = item.cast<py::tuple>();
    if (pair.size() != 2) throw py::value_error("expected (stack, count) pairs");
    std::string stack = from_text(pair[0].cast<py::str>());
    f.lines.push_back({f.text.size(), stack.size(), pair[1].cast<int64_t>()});
    f.text += stack;
    f.text += '\n';
  }
  return f;
}

// The flamegraph options both SVG bindings take.
FlamegraphOptions flame_options(const std::string& title, const std::string& count_name, int width,
                                bool bytes, const Snapshot* kinds_of) {
  FlamegraphOptions opts;
  if (kinds_of) opts.frame_kinds.add(*kinds_of);
  opts.title = title;
  opts.count_name = count_name;
  opts.width = width;
  opts.bytes = bytes;
  return opts;
}

Folded folded_lines(const Snapshot& s, const std::string& kind) {
  return kind == "segments" ? folded_segments_lines(s) : folded_memory_lines(s);
}

void bind_snapshot_text(SnapshotClass& snapshot) {
  snapshot.def("segsum", [](const Snapshot& s) { return released([&] { return segsum(s); }); })
      .def("trace_text", [](const Snapshot& s) { return released([&] { return trace_text(s); }); })
      .def("folded_memory",
           [](const Snapshot& s) { return released([&] { return folded_memory(s); }); })
      .def("folded_segments",
           [](const Snapshot& s) { return released([&] { return folded_segments(s); }); })
      .def(
          "folded_stacks",
          [](const Snapshot& s, const std::string& kind) {
            Folded f;
            {
              py::gil_scoped_release nogil;
              f = folded_lines(s, kind);
            }
            return folded_with_stacks(f.text, f.lines);
          },
          py::arg("kind"), "(folded text, [(stack, count), ...]) of `segments` or `memory`.")
      .def(
          "flamegraph_svg",
          [](const Snapshot& s, const std::string& kind, const std::string& title, int width) {
            FlamegraphOptions opts;
            opts.title = title;
            opts.width = width;
            opts.frame_kinds.add(s);
            return released([&] { return render_flamegraph_svg(folded_lines(s, kind), opts); });
          },
          py::arg("kind"), py::arg("title"), py::arg("width") = 1200);
}

}  // namespace

void bind_torch_text(py::module_& m, SnapshotClass& snapshot) {
  bind_snapshot_text(snapshot);
  m.def(
      "compare",
      [](const Snapshot& before, const Snapshot& after) {
        Comparison c;
        {
          py::gil_scoped_release nogil;
          c = compare(before, after);
        }
        py::tuple folded = folded_with_stacks(c.folded, c.folded_lines);
        return py::make_tuple(text(c.stdout_text), folded[0], folded[1]);
      },
      py::arg("before"), py::arg("after"));
  m.def(
      "render_flamegraph_svg",
      [](const py::str& folded_text, const std::string& title, const std::string& count_name,
         int width, bool bytes, const Snapshot* kinds_of) {
        std::string folded = from_text(folded_text);
        auto opts = flame_options(title, count_name, width, bytes, kinds_of);
        return released([&] { return render_flamegraph_svg(folded, opts); });
      },
      py::arg("folded"), py::arg("title") = "Flame Graph", py::arg("count_name") = "bytes",
      py::arg("width") = 1200, py::arg("bytes") = true, py::arg("kinds_of") = nullptr,
      "kinds_of: a snapshot whose frames colour the graph by kind (user code warm).");
  m.def(
      "render_flamegraph_svg_stacks",
      [](const py::iterable& stacks, const std::string& title, const std::string& count_name,
         int width, bool bytes, const Snapshot* kinds_of) {
        Folded folded = folded_of(stacks);
        auto opts = flame_options(title, count_name, width, bytes, kinds_of);
        return released([&] { return render_flamegraph_svg(folded, opts); });
      },
      py::arg("stacks"), py::arg("title") = "Flame Graph", py::arg("count_name") = "bytes",
      py::arg("width") = 1200, py::arg("bytes") = true, py::arg("kinds_of") = nullptr,
      "The flamegraph of (stack, count) pairs: no text is parsed, so a frame name may hold "
      "a newline; counts of 0 or less are left out.");
  m.def("format_size", &format_size, py::arg("num"),
        "torch._memory_viz._format_size, as the text tools print sizes.");
  m.def("format_bytes", &format_bytes, py::arg("num"),
        "Sizes as memsight's reports print them: the unit chosen after rounding.");
  m.def(
      "parse_size",
      [](const std::string& text) {
        uint64_t bytes = 0;
        if (!parse_size(text, bytes))
          throw py::value_error(
              "'" + text + "' is not a size: digits and an optional unit (512M, 8G, 80GiB, 4096)");
        return bytes;
      },
      py::arg("text"), "A size as the CLI reads it (\"512M\", \"80GiB\", \"4096\"): bytes.");
}

}  // namespace memsight::py_binding
