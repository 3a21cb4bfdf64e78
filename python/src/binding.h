#pragma once
// What the parts of memsight._core share: engine text as Python str and
// back, running engine work without the GIL, bytes-like input, the
// per-read expansion limit and folded stacks. Each part (bind_*.cpp)
// registers one idea's names; core_module.cpp calls them in turn.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/flamegraph.h"
#include "memsight/io.h"
#include "memsight/snapshot.h"
#include "memsight/text_tools.h"

namespace memsight::py_binding {

namespace py = pybind11;
using SnapshotPtr = std::shared_ptr<Snapshot>;
using SnapshotClass = py::class_<Snapshot, SnapshotPtr>;

// Engine text as a Python str. Strings are kept as the bytes the pickle
// held, and Python's pickle writes a lone surrogate as its 3-byte form, which
// is not UTF-8: such bytes become surrogate escapes, so the str encoded with
// errors="surrogateescape" gives exactly the CLI's bytes.
py::str text(const std::string& s);
// The reverse of text(), for text the package hands back (folded stacks).
std::string from_text(const py::str& s);

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
std::string_view as_view(const py::buffer_info& info);

// Sets this thread's expansion limit for one read (0: the defaults).
struct ExpansionLimit {
  explicit ExpansionLimit(uint64_t bytes) { set_max_expanded(bytes); }
  ~ExpansionLimit() { set_max_expanded(0); }
};

// Folded stacks as the package keeps them: the torch-identical text and, per
// line, its stack ("frame;frame") and count.
py::tuple folded_with_stacks(const std::string& folded, const std::vector<FoldedLine>& lines);

// The parts of the module, each registering its names.
void bind_snapshot_io(py::module_& m, SnapshotClass& snapshot);  // reading, writing
void bind_raw_snapshot(py::module_& m);                         // the native dumper's raw snapshots
void bind_torch_text(py::module_& m, SnapshotClass& snapshot);  // torch's formats, flamegraphs
void bind_analyses(py::module_& m, SnapshotClass& snapshot);    // summary, kinds, leaks, whatif
void bind_diff_and_ranks(py::module_& m);                       // across snapshots: diff, ranks
void bind_pages(py::module_& m, SnapshotClass& snapshot);       // pages, profiles, timelines

}  // namespace memsight::py_binding
