// memsight._core: the Python binding over the engine. It binds, it holds no
// logic: every function here is one call into include/memsight/*.h, with the
// GIL released while the engine works, so that Python threads (an uploader,
// a data loader) keep running while a snapshot is read or rendered.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memsight/categories.h"
#include "memsight/cli.h"
#include "memsight/diff.h"
#include "memsight/error.h"
#include "memsight/flamegraph.h"
#include "memsight/frames.h"
#include "memsight/from_raw.h"
#include "memsight/html.h"
#include "memsight/leaks.h"
#include "memsight/profile.h"
#include "memsight/ranks.h"
#include "memsight/reader.h"
#include "memsight/snapshot.h"
#include "memsight/summary.h"
#include "memsight/text_tools.h"
#include "memsight/whatif.h"

namespace py = pybind11;
using memsight::Snapshot;
using SnapshotPtr = std::shared_ptr<Snapshot>;

namespace {

// Engine text as a Python str. Strings are kept as the bytes the pickle
// held, and Python's pickle writes a lone surrogate as its 3-byte form, which
// is not UTF-8: such bytes become surrogate escapes, so the str encoded with
// errors="surrogateescape" gives exactly the CLI's bytes.
py::str text(const std::string& s) {
  PyObject* o =
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// The reverse of text(), for text the package hands back (folded stacks).
std::string from_text(const py::str& s) {
  PyObject* o = PyUnicode_AsEncodedString(s.ptr(), "utf-8", "surrogateescape");
  if (!o) throw py::error_already_set();
  auto b = py::reinterpret_steal<py::bytes>(o);
  return std::string(b);
}

// Runs `f` without the GIL and returns its std::string result as text.
template <class F>
py::str released(F&& f) {
  std::string out;
  {
    py::gil_scoped_release nogil;
    out = f();
  }
  return text(out);
}

// Bytes-like input (bytes, bytearray, memoryview) as a view; the caller keeps
// the buffer alive while the view is used.
std::string_view as_view(const py::buffer_info& info) {
  if (info.ndim > 1) throw py::value_error("expected a one-dimensional bytes-like object");
  return {static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize)};
}

// Sets this thread's expansion limit for one read (0: the defaults).
struct ExpansionLimit {
  explicit ExpansionLimit(uint64_t bytes) { memsight::set_max_expanded(bytes); }
  ~ExpansionLimit() { memsight::set_max_expanded(0); }
};

SnapshotPtr load_file(const std::string& path, const py::object& progress, bool trace,
                      uint64_t max_expanded) {
  memsight::Progress cb;
  if (!progress.is_none()) {
    cb = [progress](uint64_t done, uint64_t total) {
      py::gil_scoped_acquire gil;
      progress(done, total);
    };
  }
  py::gil_scoped_release nogil;
  ExpansionLimit limit(max_expanded);
  return std::make_shared<Snapshot>(memsight::read_snapshot_file(
      path, cb, trace ? memsight::ReadScope::Everything : memsight::ReadScope::SegmentsOnly));
}

SnapshotPtr load_bytes(const py::buffer& data, uint64_t max_expanded) {
  py::buffer_info info = data.request();
  std::string_view view = as_view(info);
  py::gil_scoped_release nogil;
  ExpansionLimit limit(max_expanded);
  return std::make_shared<Snapshot>(memsight::read_snapshot_bytes(view));
}

// Folded stacks as the package keeps them: the torch-identical text and, per
// line, its stack ("frame;frame") and count. torch writes a frame name as
// is, so one with a newline makes the text ambiguous; the stacks are not.
// Lines of one stack (every block of one allocation site) share its str.
py::tuple folded_with_stacks(const std::string& folded,
                             const std::vector<memsight::FoldedLine>& lines) {
  py::list stacks(lines.size());
  std::unordered_map<std::string_view, py::str> made;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view stack = std::string_view(folded).substr(lines[i].begin, lines[i].size);
    auto it = made.find(stack);
    if (it == made.end()) it = made.emplace(stack, text(std::string(stack))).first;
    stacks[i] = py::make_tuple(it->second, lines[i].count);
  }
  return py::make_tuple(text(folded), std::move(stacks));
}

// The reverse: stacks from the package, laid out as one text with spans.
memsight::Folded folded_of(const py::iterable& stacks) {
  memsight::Folded f;
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

py::list device_trace_lengths(const Snapshot& s) {
  py::list out;
  for (size_t d = 0; d < s.device_count(); ++d) {
    auto [b, e] = s.device_rows(d);
    out.append(e - b);
  }
  return out;
}

// The flamegraph options both SVG bindings take.
memsight::FlamegraphOptions flame_options(const std::string& title, const std::string& count_name,
                                          int width, bool bytes, const Snapshot* kinds_of) {
  memsight::FlamegraphOptions opts;
  if (kinds_of) opts.frame_kinds.add(*kinds_of);
  opts.title = title;
  opts.count_name = count_name;
  opts.width = width;
  opts.bytes = bytes;
  return opts;
}

}  // namespace

// A summary with the snapshot it describes: its text and JSON are written on
// demand (the JSON of 100,000 devices is 80 MB; the page needs another form).
struct SummaryOf {
  SnapshotPtr snap;
  memsight::Summary summary;
};

PYBIND11_MODULE(_core, m) {
  m.doc() = "memsight's C++ engine (use the memsight package, not this module directly)";

  // memsight._core.Error derives from memsight.MemsightError (a ValueError),
  // so `except memsight.MemsightError` catches engine errors.
  py::object base = py::reinterpret_borrow<py::object>(PyExc_ValueError);
  try {
    base = py::module_::import("memsight._errors").attr("MemsightError");
  } catch (py::error_already_set&) {
    PyErr_Clear();
  }
  py::register_exception<memsight::Error>(m, "Error", base.ptr());

  py::class_<Snapshot, SnapshotPtr>(m, "Snapshot")
      .def_property_readonly("device_count", &Snapshot::device_count)
      .def_property_readonly("segment_count", [](const Snapshot& s) { return s.segments.size(); })
      .def_property_readonly("block_count", [](const Snapshot& s) { return s.blocks.size(); })
      .def_property_readonly("trace_entry_count", [](const Snapshot& s) { return s.trace.rows(); })
      .def_property_readonly("trace_skipped", [](const Snapshot& s) { return s.trace_skipped; })
      .def_property_readonly("device_trace_lengths", &device_trace_lengths)
      .def_property_readonly("frame_count",
                             [](const Snapshot& s) { return s.frames.frame_count(); })
      .def_property_readonly("top_keys", [](const Snapshot& s) { return s.top_keys; })
      .def_property_readonly("legacy_segment_list",
                             [](const Snapshot& s) { return s.legacy_segment_list; })
      .def("segsum",
           [](const Snapshot& s) { return released([&] { return memsight::segsum(s); }); })
      .def("trace_text",
           [](const Snapshot& s) { return released([&] { return memsight::trace_text(s); }); })
      .def("folded_memory",
           [](const Snapshot& s) { return released([&] { return memsight::folded_memory(s); }); })
      .def("folded_segments",
           [](const Snapshot& s) { return released([&] { return memsight::folded_segments(s); }); })
      .def(
          "folded_stacks",
          [](const Snapshot& s, const std::string& kind) {
            memsight::Folded f;
            {
              py::gil_scoped_release nogil;
              f = kind == "segments" ? memsight::folded_segments_lines(s)
                                     : memsight::folded_memory_lines(s);
            }
            return folded_with_stacks(f.text, f.lines);
          },
          py::arg("kind"), "(folded text, [(stack, count), ...]) of `segments` or `memory`.")
      .def("pickle",
           [](const Snapshot& s) {
             std::string bytes;
             {
               py::gil_scoped_release nogil;
               bytes = memsight::pickle_snapshot(s);
             }
             return py::bytes(bytes);
           })
      .def("segments_pickle",
           [](const Snapshot& s) {
             std::string bytes;
             {
               py::gil_scoped_release nogil;
               bytes = memsight::pickle_segments(s);
             }
             return py::bytes(bytes);
           })
      .def(
          "write",
          [](const Snapshot& s, const std::string& path) {
            py::gil_scoped_release nogil;
            memsight::write_snapshot_file(s, path);
          },
          py::arg("path"))
      .def(
          "flamegraph_svg",
          [](const Snapshot& s, const std::string& kind, const std::string& title, int width) {
            memsight::FlamegraphOptions opts;
            opts.title = title;
            opts.width = width;
            opts.frame_kinds.add(s);
            return released([&] {
              return memsight::render_flamegraph_svg(kind == "segments"
                                                         ? memsight::folded_segments_lines(s)
                                                         : memsight::folded_memory_lines(s),
                                                     opts);
            });
          },
          py::arg("kind"), py::arg("title"), py::arg("width") = 1200)
      .def(
          "summarize",
          [](const SnapshotPtr& s, const std::string& user_code) {
            auto out = std::make_shared<SummaryOf>();
            out->snap = s;
            py::gil_scoped_release nogil;
            memsight::SummaryOptions opts;
            opts.user_code = memsight::UserCode::parse(user_code);
            out->summary = memsight::summarize(*s, opts);
            return out;
          },
          py::arg("user_code") = "")
      .def(
          "categories_json",
          [](const Snapshot& s, size_t device, const std::string& at) {
            return released([&] {
              std::string out;
              memsight::append_category_view_json(out, memsight::categories_at(s, device, at));
              return out;
            });
          },
          py::arg("device"), py::arg("at"),
          "What kind of memory on `device` at a moment (memsight/categories.h), as JSON.")
      .def(
          "leaks_text_and_json",
          [](const Snapshot& s, const std::string& user_code) {
            std::pair<std::string, std::string> out;
            {
              py::gil_scoped_release nogil;
              memsight::Leaks leaks = memsight::find_leaks(s, memsight::UserCode::parse(user_code));
              out = {memsight::leaks_text(s, leaks), memsight::leaks_json(s, leaks)};
            }
            return py::make_tuple(text(out.first), text(out.second));
          },
          py::arg("user_code") = "", "`memsight leaks`: (text, json).")
      .def(
          "whatif_text_and_json",
          [](const Snapshot& s, const std::string& set, int64_t device_memory,
             double memory_fraction) {
            memsight::WhatifRequest req{set, device_memory, memory_fraction};
            std::pair<std::string, std::string> out;
            {
              py::gil_scoped_release nogil;
              out = memsight::whatif_text_and_json(s, req);
            }
            return py::make_tuple(text(out.first), text(out.second));
          },
          py::arg("set") = "", py::arg("device_memory") = -1, py::arg("memory_fraction") = 0.0,
          "`memsight whatif`: (text, json).")
      .def("default_device", [](const Snapshot& s) { return memsight::default_device(s).first; })
      .def(
          "render_html",
          [](const Snapshot& s, const std::string& view, const std::string& title,
             const std::string& source_name, uint64_t source_bytes, const py::str& summary_json,
             int device, const std::string& user_code) {
            memsight::HtmlOptions opts;
            opts.user_code = memsight::UserCode::parse(user_code);
            if (!view.empty()) opts.view = view;
            opts.title = title;
            opts.source_name = source_name;
            opts.source_bytes = source_bytes;
            opts.summary_json = from_text(summary_json);
            opts.device = device;
            return released([&] { return memsight::render_html(s, opts); });
          },
          py::arg("view") = "", py::arg("title") = "", py::arg("source_name") = "",
          py::arg("source_bytes") = 0, py::arg("summary_json") = "", py::arg("device") = -1,
          py::arg("user_code") = "")
      .def(
          "page_devices",
          [](const Snapshot& s, int device) { return memsight::page_devices(s, device); },
          py::arg("device") = -1,
          "The devices a page holds (render_html): the one it opens on first, then the others "
          "by number.");

  py::class_<SummaryOf, std::shared_ptr<SummaryOf>>(m, "Summary")
      .def(
          "text",
          [](const SummaryOf& s, bool frames_all) {
            return released([&] { return memsight::summary_text(*s.snap, s.summary, frames_all); });
          },
          py::arg("frames_all") = false)
      .def("json",
           [](const SummaryOf& s) {
             return released([&] { return memsight::summary_json(*s.snap, s.summary); });
           })
      .def(
          "page_json",
          [](const SummaryOf& s, int device) {
            return released([&] {
              return memsight::page_summary_json(*s.snap, s.summary,
                                                 memsight::page_devices(*s.snap, device));
            });
          },
          py::arg("device") = -1,
          "The page's form (render_html): the devices the page opening on `device` holds, "
          "those with something on them, alike ones once.")
      .def(
          "groups_json",
          [](const SummaryOf& s) {
            return released([&] {
              return memsight::summary_json(*s.snap, s.summary, memsight::DeviceListing::Groups);
            });
          },
          "Each group of alike devices once, its devices in 'alike'.");

  py::class_<memsight::RanksReport, std::shared_ptr<memsight::RanksReport>>(m, "RanksReport")
      .def("text", [](const memsight::RanksReport& r) { return text(memsight::ranks_text(r)); })
      .def("json", [](const memsight::RanksReport& r) { return text(memsight::ranks_json(r)); })
      .def(
          "write_html",
          [](const memsight::RanksReport& r, const std::string& out, const std::string& pages,
             const std::string& user_code, unsigned jobs, uint64_t max_expanded) {
            py::gil_scoped_release nogil;
            ExpansionLimit limit(max_expanded);
            memsight::RanksOptions opts{memsight::UserCode::parse(user_code), jobs};
            return memsight::write_ranks_page(r, out, pages, opts);
          },
          py::arg("out"), py::arg("pages") = "notable", py::arg("user_code") = "",
          py::arg("jobs") = 0, py::arg("max_expanded") = 0,
          "Writes the page and the rank pages `pages` names beside it; returns how many.");
  m.def(
      "ranks",
      [](const std::vector<std::string>& inputs, const std::string& user_code, unsigned jobs,
         uint64_t max_expanded) {
        py::gil_scoped_release nogil;
        ExpansionLimit limit(max_expanded);
        memsight::RanksOptions opts{memsight::UserCode::parse(user_code), jobs};
        return std::make_shared<memsight::RanksReport>(memsight::read_ranks(inputs, opts));
      },
      py::arg("inputs"), py::arg("user_code") = "", py::arg("jobs") = 0,
      py::arg("max_expanded") = 0,
      "`memsight ranks`: snapshots, directories, glob patterns or manifests, merged.");
  // memsight diff: each side measured on its own, then compared.
  py::class_<memsight::DiffMoment>(m, "DiffMoment")
      .def_readonly("file", &memsight::DiffMoment::file)
      .def_readonly("device", &memsight::DiffMoment::device)
      .def_readonly("at", &memsight::DiffMoment::at);
  py::class_<memsight::SnapshotDiff>(m, "SnapshotDiff")
      .def("text",
           [](const memsight::SnapshotDiff& d) {
             return released([&] { return memsight::diff_text(d); });
           })
      .def("json",
           [](const memsight::SnapshotDiff& d) {
             return released([&] { return memsight::diff_json(d); });
           })
      .def("svg",
           [](const memsight::SnapshotDiff& d) {
             return released([&] { return memsight::diff_svg(d); });
           })
      .def("folded",
           [](const memsight::SnapshotDiff& d) {
             return released([&] { return memsight::diff_folded(d).text; });
           })
      .def(
          "html",
          [](const memsight::SnapshotDiff& d, const std::string& title) {
            return released([&] { return memsight::diff_html(d, title); });
          },
          py::arg("title"));
  m.def("diff_plan", &memsight::diff_plan, py::arg("two_snapshots"), py::arg("moments"));
  m.def(
      "measure_moments",
      [](const Snapshot& s, const std::string& file, size_t device,
         const std::vector<std::string>& at, const std::string& user_code) {
        py::gil_scoped_release nogil;
        return memsight::measure_moments(s, file, device, at, memsight::UserCode::parse(user_code));
      },
      py::arg("snapshot"), py::arg("file"), py::arg("device"), py::arg("at"),
      py::arg("user_code") = "");
  m.def("diff_mismatch", &memsight::mismatch, py::arg("before"), py::arg("after"));
  m.def(
      "diff_moments",
      [](const memsight::DiffMoment& a, const memsight::DiffMoment& b) {
        py::gil_scoped_release nogil;
        return memsight::diff_moments(a, b);
      },
      py::arg("before"), py::arg("after"));
  m.def("load", &load_file, py::arg("path"), py::arg("progress") = py::none(),
        py::arg("trace") = true, py::arg("max_expanded") = 0,
        "Reads a snapshot file (pickle, optionally gzip/zstd/xz-compressed); with "
        "trace=False the trace is checked but not decoded.");
  m.def("loads", &load_bytes, py::arg("data"), py::arg("max_expanded") = 0,
        "Reads a snapshot from pickled bytes.");
  m.def(
      "compare",
      [](const Snapshot& before, const Snapshot& after) {
        memsight::Comparison c;
        {
          py::gil_scoped_release nogil;
          c = memsight::compare(before, after);
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
        return released([&] { return memsight::render_flamegraph_svg(folded, opts); });
      },
      py::arg("folded"), py::arg("title") = "Flame Graph", py::arg("count_name") = "bytes",
      py::arg("width") = 1200, py::arg("bytes") = true, py::arg("kinds_of") = nullptr,
      "kinds_of: a snapshot whose frames colour the graph by kind (user code warm).");
  m.def(
      "render_flamegraph_svg_stacks",
      [](const py::iterable& stacks, const std::string& title, const std::string& count_name,
         int width, bool bytes, const Snapshot* kinds_of) {
        memsight::Folded folded = folded_of(stacks);
        auto opts = flame_options(title, count_name, width, bytes, kinds_of);
        return released([&] { return memsight::render_flamegraph_svg(folded, opts); });
      },
      py::arg("stacks"), py::arg("title") = "Flame Graph", py::arg("count_name") = "bytes",
      py::arg("width") = 1200, py::arg("bytes") = true, py::arg("kinds_of") = nullptr,
      "The flamegraph of (stack, count) pairs: no text is parsed, so a frame name may hold "
      "a newline; counts of 0 or less are left out.");
  m.def(
      "snapshot_from_raw",
      [](uintptr_t address, const py::bytes& extra) {
        std::string extra_pickle = extra;
        py::gil_scoped_release nogil;
        Snapshot snap =
            memsight::snapshot_from_raw(*reinterpret_cast<const memsight_raw_snapshot*>(address));
        if (!extra_pickle.empty()) {
          // memsight's own keys beside torch's (memsight_tags, memsight_device_memory),
          // read by the one safe reader.
          Snapshot e = memsight::read_snapshot_bytes(extra_pickle);
          for (auto& [k, v] : e.top_level) {
            snap.top_keys.push_back(k);
            snap.top_level.emplace_back(k, std::move(v));
          }
        }
        return std::make_shared<Snapshot>(std::move(snap));
      },
      py::arg("address"), py::arg("extra") = py::bytes(),
      "The model of a raw allocator snapshot (the native dumper's arrays at `address`), with "
      "the top-level keys of `extra` (a pickled dict holding 'segments': [] and plain data).");
  m.def("format_size", &memsight::format_size, py::arg("num"),
        "torch._memory_viz._format_size, as the text tools print sizes.");
  m.def("format_bytes", &memsight::format_bytes, py::arg("num"),
        "Sizes as memsight's reports print them: the unit chosen after rounding.");
  m.def(
      "profile_report",
      [](const std::string& path, const std::string& user_code, const std::string& html_title) {
        std::tuple<std::string, std::string, std::string> out;
        {
          py::gil_scoped_release nogil;
          memsight::ProfileReport r = memsight::analyze_profile(
              memsight::read_profile_trace(path), memsight::UserCode::parse(user_code));
          std::get<0>(out) = memsight::profile_text(r);
          std::get<1>(out) = memsight::profile_json(r);
          if (!html_title.empty()) std::get<2>(out) = memsight::profile_html(r, html_title);
        }
        return out;
      },
      py::arg("path"), py::arg("user_code") = "", py::arg("html_title") = "",
      "A torch.profiler Chrome trace's per-step report: (text, json, html if titled).");
  m.def(
      "timeline_html",
      [](const py::object& source, const std::string& title) {
        memsight::MemoryTimeline t;
        if (py::isinstance<py::bytes>(source)) {
          std::string data = source.cast<std::string>();
          py::gil_scoped_release nogil;
          t = memsight::read_memory_timeline_bytes(data);
        } else {
          std::string path = py::str(source);
          py::gil_scoped_release nogil;
          t = memsight::read_memory_timeline(path);
        }
        return released([&] { return memsight::timeline_html(t, title); });
      },
      py::arg("source"), py::arg("title"),
      "torch's export_memory_timeline output (a path, or the bytes) as a self-contained page.");
  m.def(
      "frame_kinds",
      [](const std::vector<std::pair<std::string, std::string>>& frames,
         const std::string& user_code) {
        memsight::UserCode uc = memsight::UserCode::parse(user_code);
        std::vector<memsight::FrameKind> kinds;
        std::vector<std::string> names;
        for (const auto& [name, file] : frames) {
          kinds.push_back(memsight::classify_frame(name, file, uc));
          names.emplace_back(memsight::frame_kind_name(kinds.back()));
        }
        return py::make_tuple(names, memsight::site_index(kinds));
      },
      py::arg("frames"), py::arg("user_code") = "",
      "Kinds of (name, filename) frames, innermost first, and the site's index (-1: none).");
  m.def(
      "is_html_view", [](const std::string& v) { return memsight::is_html_view(v); },
      py::arg("view"));
  m.def(
      "write_file_atomic",
      [](const std::string& path, const py::buffer& content) {
        py::buffer_info info = content.request();
        std::string_view view = as_view(info);
        py::gil_scoped_release nogil;
        memsight::write_file_atomic(path, view);
      },
      py::arg("path"), py::arg("content"));
  m.def(
      "cli_main",
      [](const std::vector<std::string>& argv) {
        std::fflush(stdout);
        int rc;
        {
          py::gil_scoped_release nogil;
          rc = memsight::cli_main(argv);
          std::cout.flush();
          std::cerr.flush();
        }
        return rc;
      },
      py::arg("argv"), "Runs the memsight CLI with argv (the arguments after the program name).");
}
