// The analyses across snapshots: `memsight diff` (each side measured on its
// own, then compared) and `memsight ranks` (memsight._core.RanksReport).
#include <pybind11/stl.h>

#include "binding.h"
#include "memsight/diff.h"
#include "memsight/ranks.h"

namespace memsight::py_binding {
namespace {

void bind_diff(py::module_& m) {
  py::class_<DiffMoment>(m, "DiffMoment")
      .def_readonly("file", &DiffMoment::file)
      .def_readonly("device", &DiffMoment::device)
      .def_readonly("at", &DiffMoment::at);
  py::class_<SnapshotDiff>(m, "SnapshotDiff")
      .def("text", [](const SnapshotDiff& d) { return released([&] { return diff_text(d); }); })
      .def("json", [](const SnapshotDiff& d) { return released([&] { return diff_json(d); }); })
      .def("svg", [](const SnapshotDiff& d) { return released([&] { return diff_svg(d); }); })
      .def("folded",
           [](const SnapshotDiff& d) { return released([&] { return diff_folded(d).text; }); })
      .def(
          "html",
          [](const SnapshotDiff& d, const std::string& title) {
            return released([&] { return diff_html(d, title); });
          },
          py::arg("title"));
  m.def("diff_plan", &diff_plan, py::arg("two_snapshots"), py::arg("moments"));
  m.def(
      "measure_moments",
      [](const Snapshot& s, const std::string& file, size_t device,
         const std::vector<std::string>& at, const std::string& user_code) {
        py::gil_scoped_release nogil;
        return measure_moments(s, file, device, at, UserCode::parse(user_code));
      },
      py::arg("snapshot"), py::arg("file"), py::arg("device"), py::arg("at"),
      py::arg("user_code") = "");
  m.def("diff_mismatch", &mismatch, py::arg("before"), py::arg("after"));
  m.def(
      "diff_moments",
      [](const DiffMoment& a, const DiffMoment& b) {
        py::gil_scoped_release nogil;
        return diff_moments(a, b);
      },
      py::arg("before"), py::arg("after"));
}

void bind_ranks(py::module_& m) {
  py::class_<RanksReport, std::shared_ptr<RanksReport>>(m, "RanksReport")
      .def("text", [](const RanksReport& r) { return text(ranks_text(r)); })
      .def("json", [](const RanksReport& r) { return text(ranks_json(r)); })
      .def(
          "write_html",
          [](const RanksReport& r, const std::string& out, const std::string& pages,
             const std::string& user_code, unsigned jobs, uint64_t max_expanded, bool force) {
            py::gil_scoped_release nogil;
            ExpansionLimit limit(max_expanded);
            RanksOptions opts{UserCode::parse(user_code), jobs};
            opts.force = force;
            return write_ranks_page(r, out, pages, opts);
          },
          py::arg("out"), py::arg("pages") = "notable", py::arg("user_code") = "",
          py::arg("jobs") = 0, py::arg("max_expanded") = 0, py::arg("force") = false,
          "Writes the page and the rank pages `pages` names beside it; returns how many.");
  m.def(
      "ranks",
      [](const std::vector<std::string>& inputs, const std::string& user_code, unsigned jobs,
         uint64_t max_expanded, bool allow_absolute) {
        py::gil_scoped_release nogil;
        ExpansionLimit limit(max_expanded);
        RanksOptions opts{UserCode::parse(user_code), jobs, allow_absolute};
        return std::make_shared<RanksReport>(read_ranks(inputs, opts));
      },
      py::arg("inputs"), py::arg("user_code") = "", py::arg("jobs") = 0,
      py::arg("max_expanded") = 0, py::arg("allow_absolute") = false,
      "`memsight ranks`: snapshots, directories, glob patterns or manifests, merged.");
}

}  // namespace

void bind_diff_and_ranks(py::module_& m) {
  bind_ranks(m);
  bind_diff(m);
}

}  // namespace memsight::py_binding
