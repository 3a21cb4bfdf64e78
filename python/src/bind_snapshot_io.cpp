// Reading and writing snapshots: load, loads, the Snapshot's sizes, its
// pickle and write, and atomic file writes.
#include <pybind11/stl.h>

#include "binding.h"
#include "memsight/io.h"
#include "memsight/reader.h"

namespace memsight::py_binding {
namespace {

SnapshotPtr load_file(const std::string& path, const py::object& progress, bool trace,
                      uint64_t max_expanded) {
  Progress cb;
  if (!progress.is_none()) {
    cb = [progress](uint64_t done, uint64_t total) {
      py::gil_scoped_acquire gil;
      progress(done, total);
    };
  }
  py::gil_scoped_release nogil;
  ExpansionLimit limit(max_expanded);
  return std::make_shared<Snapshot>(
      read_snapshot_file(path, cb, trace ? ReadScope::Everything : ReadScope::SegmentsOnly));
}

SnapshotPtr load_bytes(const py::buffer& data, uint64_t max_expanded) {
  py::buffer_info info = data.request();
  std::string_view view = as_view(info);
  py::gil_scoped_release nogil;
  ExpansionLimit limit(max_expanded);
  return std::make_shared<Snapshot>(read_snapshot_bytes(view));
}

py::list device_trace_lengths(const Snapshot& s) {
  py::list out;
  for (size_t d = 0; d < s.device_count(); ++d) {
    auto [b, e] = s.device_rows(d);
    out.append(e - b);
  }
  return out;
}

// Runs `f` without the GIL and returns its std::string result as bytes.
template <class F>
py::bytes released_bytes(F&& f) {
  std::string bytes;
  {
    py::gil_scoped_release nogil;
    bytes = f();
  }
  return py::bytes(bytes);
}

}  // namespace

void bind_snapshot_io(py::module_& m, SnapshotClass& snapshot) {
  snapshot.def_property_readonly("device_count", &Snapshot::device_count)
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
      .def("pickle",
           [](const Snapshot& s) { return released_bytes([&] { return pickle_snapshot(s); }); })
      .def("segments_pickle",
           [](const Snapshot& s) { return released_bytes([&] { return pickle_segments(s); }); })
      .def(
          "write",
          [](const Snapshot& s, const std::string& path, bool force) {
            py::gil_scoped_release nogil;
            write_snapshot_file(s, path, force);
          },
          py::arg("path"), py::arg("force") = false);
  m.def("load", &load_file, py::arg("path"), py::arg("progress") = py::none(),
        py::arg("trace") = true, py::arg("max_expanded") = 0,
        "Reads a snapshot file (pickle, optionally gzip/zstd/xz-compressed); with "
        "trace=False the trace is checked but not decoded.");
  m.def("loads", &load_bytes, py::arg("data"), py::arg("max_expanded") = 0,
        "Reads a snapshot from pickled bytes.");
  m.def(
      "write_file_atomic",
      [](const std::string& path, const py::buffer& content, bool force) {
        py::buffer_info info = content.request();
        std::string_view view = as_view(info);
        py::gil_scoped_release nogil;
        write_file_atomic(path, view, force);
      },
      py::arg("path"), py::arg("content"), py::arg("force") = false);
}

}  // namespace memsight::py_binding
