// The pages: a snapshot's report (render_html), a profiler trace's report
// and torch's memory timeline.
#include <pybind11/stl.h>

#include <tuple>

#include "binding.h"
#include "memsight/html.h"
#include "memsight/profile.h"

namespace memsight::py_binding {
namespace {

void bind_snapshot_page(SnapshotClass& snapshot) {
  snapshot
      .def(
          "render_html",
          [](const Snapshot& s, const std::string& view, const std::string& title,
             const std::string& source_name, uint64_t source_bytes, const py::str& summary_json,
             int device, const std::string& user_code) {
            HtmlOptions opts;
            opts.user_code = UserCode::parse(user_code);
            if (!view.empty()) opts.view = view;
            opts.title = title;
            opts.source_name = source_name;
            opts.source_bytes = source_bytes;
            opts.summary_json = from_text(summary_json);
            opts.device = device;
            return released([&] { return render_html(s, opts); });
          },
          py::arg("view") = "", py::arg("title") = "", py::arg("source_name") = "",
          py::arg("source_bytes") = 0, py::arg("summary_json") = "", py::arg("device") = -1,
          py::arg("user_code") = "")
      .def(
          "page_devices", [](const Snapshot& s, int device) { return page_devices(s, device); },
          py::arg("device") = -1,
          "The devices a page holds (render_html): the one it opens on first, then the others "
          "by number.");
}

void bind_profile_pages(py::module_& m) {
  m.def(
      "profile_report",
      [](const std::string& path, const std::string& user_code, const std::string& html_title) {
        std::tuple<std::string, std::string, std::string> out;
        {
          py::gil_scoped_release nogil;
          ProfileReport r = analyze_profile(read_profile_trace(path), UserCode::parse(user_code));
          std::get<0>(out) = profile_text(r);
          std::get<1>(out) = profile_json(r);
          if (!html_title.empty()) std::get<2>(out) = profile_html(r, html_title);
        }
        return out;
      },
      py::arg("path"), py::arg("user_code") = "", py::arg("html_title") = "",
      "A torch.profiler Chrome trace's per-step report: (text, json, html if titled).");
  m.def(
      "timeline_html",
      [](const py::object& source, const std::string& title) {
        MemoryTimeline t;
        if (py::isinstance<py::bytes>(source)) {
          std::string data = source.cast<std::string>();
          py::gil_scoped_release nogil;
          t = read_memory_timeline_bytes(data);
        } else {
          std::string path = py::str(source);
          py::gil_scoped_release nogil;
          t = read_memory_timeline(path);
        }
        return released([&] { return timeline_html(t, title); });
      },
      py::arg("source"), py::arg("title"),
      "torch's export_memory_timeline output (a path, or the bytes) as a self-contained page.");
}

}  // namespace

void bind_pages(py::module_& m, SnapshotClass& snapshot) {
  bind_snapshot_page(snapshot);
  bind_profile_pages(m);
  m.def(
      "is_html_view", [](const std::string& v) { return is_html_view(v); }, py::arg("view"));
}

}  // namespace memsight::py_binding
