// memsight._linehook: the per-line hook of memsight.torch.LineProfiler.
//
// A Hook keeps, in C++, the memory statistics of every line of the code
// objects it is given. It is driven either by a C trace function (any Python
// version; installed with start_trace) or by sys.monitoring callbacks (the
// on_* methods; Python 3.12+, wired up in line_profiler.py). At each line or
// return of a profiled function it reads the counters into an int64 array,
// attributes them to the line that just ran, then resets the peak and
// accumulated counters. The counters come from a native reader
// (counters_abi.h: for CUDA, c10's DeviceStats; no Python object is made), or
// else from a Python sampler returning a dict (torch._C._cuda_memoryStats)
// and Python resetters.
//
// Folding follows the counters' meaning: "*.peak" keeps the maximum,
// "*.allocated" and "*.freed" are summed, anything else keeps its latest
// value. Samples taken inside a nested profiled function are folded into the
// caller's current line as well. Across calls each line keeps the maximum.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <algorithm>
#include <cstdint>

#include "linehook_hook.h"

namespace memsight::linehook {
namespace {

// A native reader's failure, as a recorded error or a pending exception (see fail()).
int native_failed(Hook* self, const char* msg, const char* what) {
  PyErr_SetString(PyExc_RuntimeError, msg);
  return fail(*self->st, what) ? 0 : -1;
}

// 1: sampled; 0: failed, recorded; -1: an exception must propagate.
int take_sample(Hook* self) {
  State& st = *self->st;
  if (self->native != nullptr) {
    st.sample.resize(static_cast<std::size_t>(self->native->count));
    char err[256] = "";
    if (self->native->read(self->native_device, st.sample.data(), err, sizeof err) != 0)
      return native_failed(self, err, "reading the memory counters failed");
    st.samples++;
    return 1;
  }
  PyObject* res = PyObject_CallOneArg(self->sampler, self->device);
  if (res == nullptr) return fail(st, "the memory sampler raised") ? 0 : -1;
  if (!PyDict_Check(res)) {
    Py_DECREF(res);
    PyErr_SetString(PyExc_TypeError, "it must return a dict");
    return fail(st, "the memory sampler returned no dict") ? 0 : -1;
  }
  st.sample.clear();
  const bool first = st.keys.empty();
  bool ok = flatten(res, "", st.sample, first ? &st.keys : nullptr);
  Py_DECREF(res);
  if (!ok) return fail(st, "the memory sampler returned a bad value") ? 0 : -1;
  if (first) {
    st.folds.clear();
    for (const auto& k : st.keys) st.folds.push_back(fold_for(k));
  } else if (st.sample.size() != st.keys.size()) {
    PyErr_SetString(PyExc_ValueError, "its keys changed between samples");
    return fail(st, "the memory sampler is inconsistent") ? 0 : -1;
  }
  st.samples++;
  return 1;
}

// 0 on success or a recorded failure; -1 when an exception must propagate.
int run_resetters(Hook* self) {
  if (self->native != nullptr) {
    char err[256] = "";
    if (self->native->reset(self->native_device, err, sizeof err) != 0)
      return native_failed(self, err, "resetting the memory counters failed");
    return 0;
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(self->resetters);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* r = PyObject_CallOneArg(PyTuple_GET_ITEM(self->resetters, i), self->device);
    if (r == nullptr) return fail(*self->st, "resetting the memory counters raised") ? 0 : -1;
    Py_DECREF(r);
  }
  return 0;
}

// A new line, or the end (leaving), of the innermost profiled frame. -1: exception pending.
int on_event(Hook* self, int line, bool leaving) {
  State& st = *self->st;
  const int got = take_sample(self);
  if (got <= 0) return got;
  for (auto& a : st.stack) fold_into(a.acc, a.has_acc, st);
  Active& top = st.stack.back();
  LineStats& ls = st.stats[top.code][top.prev_line];
  if (ls.hits == 0) {
    ls.values = top.acc;
  } else {
    for (std::size_t i = 0; i < ls.values.size(); ++i)
      ls.values[i] = std::max(ls.values[i], top.acc[i]);
  }
  ls.hits++;
  top.has_acc = false;
  if (leaving) {
    st.stack.pop_back();
  } else {
    top.prev_line = line;
  }
  return run_resetters(self);
}

int trace(PyObject* obj, PyFrameObject* frame, int what, PyObject* arg) {
  auto* self = reinterpret_cast<Hook*>(obj);
  State& st = *self->st;
  if (st.saved_func != nullptr && st.saved_func(st.saved_obj, frame, what, arg) < 0) return -1;
  if (!st.enabled) return 0;
  st.events++;
  auto* f = reinterpret_cast<PyObject*>(frame);
  switch (what) {
    case PyTrace_CALL: {
      PyCodeObject* code = PyFrame_GetCode(frame);
      auto* c = reinterpret_cast<PyObject*>(code);
      // Other functions' line events still arrive (and return at once): switching them off
      // per frame (f_trace_lines) would also hide them from a debugger attached later.
      if (st.first_line.count(c) != 0) push(st, f, c);
      Py_DECREF(code);
      return 0;
    }
    case PyTrace_LINE:
      return top_is(st, f) ? on_event(self, PyFrame_GetLineNumber(frame), false) : 0;
    case PyTrace_RETURN:
      return top_is(st, f) ? on_event(self, 0, true) : 0;
    default:
      return 0;
  }
}

// A sys.monitoring event of the innermost profiled frame: a new line (args: code, line) or
// its end (args: code, offset, value).
PyObject* monitor_event(PyObject* obj, PyObject* const* args, Py_ssize_t n, bool leaving) {
  auto* self = reinterpret_cast<Hook*>(obj);
  State& st = *self->st;
  if (!mine(st) || n < (leaving ? 1 : 2) || !top_is(st, args[0])) Py_RETURN_NONE;
  st.events++;
  long line = 0;
  if (!leaving) {
    line = PyLong_AsLong(args[1]);
    if (line == -1 && PyErr_Occurred()) return nullptr;
  }
  if (on_event(self, static_cast<int>(line), leaving) < 0) return nullptr;
  Py_RETURN_NONE;
}

}  // namespace

PyObject* hook_start_trace(PyObject* obj, PyObject*) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  if (st.tracing) {  // still in the chain (stopped while another hook was on top): resume
    st.stack.clear();
    st.enabled = true;
    st.owner = PyThread_get_thread_ident();
    Py_RETURN_NONE;
  }
  PyThreadState* ts = PyThreadState_Get();
  st.saved_func = ts->c_tracefunc;
  st.saved_obj = ts->c_traceobj;
  Py_XINCREF(st.saved_obj);
  st.stack.clear();
  PyEval_SetTrace(trace, obj);
  if (PyErr_Occurred()) return nullptr;
  st.tracing = true;
  st.enabled = true;
  st.owner = PyThread_get_thread_ident();
  Py_RETURN_NONE;
}

// Restores the tracer that was there before, if ours is still the current one.
// Returns False when another tracer has been installed over ours since.
PyObject* hook_stop_trace(PyObject* obj, PyObject*) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  st.enabled = false;
  st.stack.clear();
  if (!st.tracing) Py_RETURN_TRUE;
  PyThreadState* ts = PyThreadState_Get();
  if (ts->c_tracefunc != trace || ts->c_traceobj != obj) Py_RETURN_FALSE;
  st.tracing = false;
  PyObject* saved = st.saved_obj;
  Py_tracefunc func = st.saved_func;
  st.saved_obj = nullptr;
  st.saved_func = nullptr;
  // Hooks below ours that were stopped while ours was on top leave the chain now too.
  while (func == trace && saved != nullptr) {
    State& below = *reinterpret_cast<Hook*>(saved)->st;
    if (below.enabled) break;
    Py_tracefunc next_func = below.saved_func;
    PyObject* next_obj = below.saved_obj;
    below.saved_func = nullptr;
    below.saved_obj = nullptr;
    below.tracing = false;
    Py_DECREF(saved);
    func = next_func;
    saved = next_obj;  // the reference moves from below to us
  }
  PyEval_SetTrace(func, saved);
  Py_XDECREF(saved);
  if (PyErr_Occurred()) return nullptr;
  Py_RETURN_TRUE;
}

PyObject* hook_on_start(PyObject* obj, PyObject* const* args, Py_ssize_t n) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  if (mine(st) && n >= 1) {
    st.events++;
    push(st, args[0], args[0]);
  }
  Py_RETURN_NONE;
}

PyObject* hook_on_line(PyObject* obj, PyObject* const* args, Py_ssize_t n) {
  return monitor_event(obj, args, n, false);
}

PyObject* hook_on_leave(PyObject* obj, PyObject* const* args, Py_ssize_t n) {
  return monitor_event(obj, args, n, true);
}

}  // namespace memsight::linehook
