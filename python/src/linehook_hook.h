// The Python type memsight._linehook.Hook, shared by its two halves: the
// events on the per-line path (linehook.cpp) and the methods that set it up
// and read its records (linehook_methods.cpp). Python calls both through the
// type's method table, so no call between the two files is on the per-line
// path.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "counters_abi.h"
#include "linehook_state.h"

namespace memsight::linehook {

struct Hook {
  PyObject_HEAD State* st;
  PyObject* sampler;
  PyObject* resetters;  // tuple of callables
  PyObject* device;
  const memsight_counters* native;  // when set, used instead of sampler and resetters
  int native_device;                // device as an int, for the native reader
};

// The events (linehook.cpp).
PyObject* hook_start_trace(PyObject* obj, PyObject*);
PyObject* hook_stop_trace(PyObject* obj, PyObject*);
PyObject* hook_on_start(PyObject* obj, PyObject* const* args, Py_ssize_t n);
PyObject* hook_on_line(PyObject* obj, PyObject* const* args, Py_ssize_t n);
PyObject* hook_on_leave(PyObject* obj, PyObject* const* args, Py_ssize_t n);

}  // namespace memsight::linehook
