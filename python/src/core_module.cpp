// memsight._core: the Python binding over the engine. It binds, it holds no
// logic: every function is one call into include/memsight/*.h, with the GIL
// released while the engine works, so that Python threads (an uploader, a
// data loader) keep running while a snapshot is read or rendered. Each idea's
// names are registered by its own part (binding.h lists them).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "binding.h"
#include "memsight/cli.h"
#include "memsight/error.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  using namespace memsight::py_binding;
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

  SnapshotClass snapshot(m, "Snapshot");
  bind_snapshot_io(m, snapshot);
  bind_torch_text(m, snapshot);
  bind_analyses(m, snapshot);
  bind_pages(m, snapshot);
  bind_diff_and_ranks(m);
  bind_raw_snapshot(m);

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
