// The analyses of one snapshot: summary (memsight._core.Summary), kinds of
// memory and of frames, leaks and what-if.
#include <pybind11/stl.h>

#include "binding.h"
#include "memsight/categories.h"
#include "memsight/diff.h"
#include "memsight/estimate.h"
#include "memsight/frames.h"
#include "memsight/html.h"
#include "memsight/leaks.h"
#include "memsight/summary.h"
#include "memsight/whatif.h"

namespace memsight::py_binding {
namespace {

// A summary with the snapshot it describes: its text and JSON are written on
// demand (the JSON of 100,000 devices is 80 MB; the page needs another form).
struct SummaryOf {
  SnapshotPtr snap;
  Summary summary;
};

void bind_summary(py::module_& m, SnapshotClass& snapshot) {
  py::class_<SummaryOf, std::shared_ptr<SummaryOf>>(m, "Summary")
      .def(
          "text",
          [](const SummaryOf& s, bool frames_all) {
            return released([&] { return summary_text(*s.snap, s.summary, frames_all); });
          },
          py::arg("frames_all") = false)
      .def("json",
           [](const SummaryOf& s) {
             return released([&] { return summary_json(*s.snap, s.summary); });
           })
      .def(
          "page_json",
          [](const SummaryOf& s, int device) {
            return released([&] {
              return page_summary_json(*s.snap, s.summary, page_devices(*s.snap, device));
            });
          },
          py::arg("device") = -1,
          "The page's form (render_html): the devices the page opening on `device` holds, "
          "those with something on them, alike ones once.")
      .def(
          "groups_json",
          [](const SummaryOf& s) {
            return released(
                [&] { return summary_json(*s.snap, s.summary, DeviceListing::Groups); });
          },
          "Each group of alike devices once, its devices in 'alike'.");
  snapshot.def(
      "summarize",
      [](const SnapshotPtr& s, const std::string& user_code) {
        auto out = std::make_shared<SummaryOf>();
        out->snap = s;
        py::gil_scoped_release nogil;
        SummaryOptions opts;
        opts.user_code = UserCode::parse(user_code);
        out->summary = summarize(*s, opts);
        return out;
      },
      py::arg("user_code") = "");
}

// `memsight leaks` and `memsight whatif`: (text, json) each.
void bind_leaks_and_whatif(SnapshotClass& snapshot) {
  snapshot
      .def(
          "leaks_text_and_json",
          [](const Snapshot& s, const std::string& user_code) {
            std::pair<std::string, std::string> out;
            {
              py::gil_scoped_release nogil;
              Leaks leaks = find_leaks(s, UserCode::parse(user_code));
              out = {leaks_text(s, leaks), leaks_json(s, leaks)};
            }
            return py::make_tuple(text(out.first), text(out.second));
          },
          py::arg("user_code") = "", "`memsight leaks`: (text, json).")
      .def(
          "whatif_text_and_json",
          [](const Snapshot& s, const std::string& set, const std::string& device_memory,
             double memory_fraction) {
            // The CLI's rule for a size ("80G", bytes, at least 1 MiB).
            const int64_t bytes =
                device_memory.empty() ? -1 : parse_device_memory(device_memory, "device_memory");
            WhatifRequest req{set, bytes, memory_fraction};
            std::pair<std::string, std::string> out;
            {
              py::gil_scoped_release nogil;
              out = whatif_text_and_json(s, req);
            }
            return py::make_tuple(text(out.first), text(out.second));
          },
          py::arg("set") = "", py::arg("device_memory") = "", py::arg("memory_fraction") = 0.0,
          "`memsight whatif`: (text, json).")
      .def(
          "estimate_completed",
          [](const Snapshot& s, const std::string& set, const std::string& device_memory,
             double memory_fraction) {
            const int64_t bytes =
                device_memory.empty() ? -1 : parse_device_memory(device_memory, "device_memory");
            if (memory_fraction != 0)
              check_memory_fraction(memory_fraction, std::to_string(memory_fraction),
                                    "memory_fraction");
            EstimateRequest req{set, bytes, memory_fraction};
            auto e = [&] {
              py::gil_scoped_release nogil;
              return complete_estimate(s, req);
            }();
            return py::make_tuple(std::make_shared<Snapshot>(std::move(e.snapshot)), text(e.text),
                                  text(e.json));
          },
          py::arg("set") = "", py::arg("device_memory") = "", py::arg("memory_fraction") = 0.0,
          "`memsight estimate`: (completed snapshot, text, json).");
}

void bind_kinds(py::module_& m, SnapshotClass& snapshot) {
  snapshot
      .def(
          "categories_json",
          [](const Snapshot& s, size_t device, const std::string& at) {
            return released([&] {
              std::string out;
              append_category_view_json(out, categories_at(s, device, at));
              return out;
            });
          },
          py::arg("device"), py::arg("at"),
          "What kind of memory on `device` at a moment (memsight/categories.h), as JSON.")
      .def("default_device", [](const Snapshot& s) { return default_device(s).first; });
  m.def(
      "frame_kinds",
      [](const std::vector<std::pair<std::string, std::string>>& frames,
         const std::string& user_code) {
        UserCode uc = UserCode::parse(user_code);
        std::vector<FrameKind> kinds;
        std::vector<std::string> names;
        for (const auto& [name, file] : frames) {
          kinds.push_back(classify_frame(name, file, uc));
          names.emplace_back(frame_kind_name(kinds.back()));
        }
        return py::make_tuple(names, site_index(kinds));
      },
      py::arg("frames"), py::arg("user_code") = "",
      "Kinds of (name, filename) frames, innermost first, and the site's index (-1: none).");
}

}  // namespace

void bind_analyses(py::module_& m, SnapshotClass& snapshot) {
  bind_summary(m, snapshot);
  bind_leaks_and_whatif(snapshot);
  bind_kinds(m, snapshot);
}

}  // namespace memsight::py_binding
