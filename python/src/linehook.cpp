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
#include <new>
#include <string>
#include <vector>

#include "counters_abi.h"
#include "linehook_state.h"

namespace memsight::linehook {
namespace {

struct Hook {
  PyObject_HEAD State* st;
  PyObject* sampler;
  PyObject* resetters;  // tuple of callables
  PyObject* device;
  const memsight_counters* native;  // when set, used instead of sampler and resetters
  int native_device;                // device as an int, for the native reader
};

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

// ---- Python methods ---------------------------------------------------------------------------

int set_device(PyObject* obj, PyObject* value, void*);

PyObject* hook_new(PyTypeObject* type, PyObject*, PyObject*) {
  auto* self = reinterpret_cast<Hook*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->st = new (std::nothrow) State();
  if (self->st == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  self->resetters = PyTuple_New(0);
  self->device = PyLong_FromLong(0);
  Py_INCREF(Py_None);
  self->sampler = Py_None;
  self->native = nullptr;
  self->native_device = 0;
  return reinterpret_cast<PyObject*>(self);
}

int hook_init(PyObject* obj, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<Hook*>(obj);
  static const char* names[] = {"sampler", "resetters", "device", nullptr};
  PyObject* sampler = nullptr;
  PyObject* resetters = nullptr;
  PyObject* device = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:Hook", const_cast<char**>(names), &sampler,
                                   &resetters, &device))
    return -1;
  if (!PyCallable_Check(sampler)) {
    PyErr_SetString(PyExc_TypeError, "sampler must be callable");
    return -1;
  }
  PyObject* tup = resetters == nullptr ? PyTuple_New(0) : PySequence_Tuple(resetters);
  if (tup == nullptr) return -1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); ++i) {
    if (!PyCallable_Check(PyTuple_GET_ITEM(tup, i))) {
      Py_DECREF(tup);
      PyErr_SetString(PyExc_TypeError, "resetters must be callables");
      return -1;
    }
  }
  Py_INCREF(sampler);
  Py_SETREF(self->sampler, sampler);
  Py_SETREF(self->resetters, tup);
  if (device != nullptr && set_device(obj, device, nullptr) < 0) return -1;
  return 0;
}

void hook_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<Hook*>(obj);
  if (self->st != nullptr) {
    drop_codes(*self->st);
    Py_XDECREF(self->st->saved_obj);
    delete self->st;
  }
  Py_XDECREF(self->sampler);
  Py_XDECREF(self->resetters);
  Py_XDECREF(self->device);
  PyTypeObject* type = Py_TYPE(obj);
  type->tp_free(obj);
  Py_DECREF(type);
}

PyObject* hook_add_code(PyObject* obj, PyObject* code) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "add_code expects a code object");
    return nullptr;
  }
  if (st.first_line.count(code) == 0) {
    Py_INCREF(code);
    st.first_line[code] = reinterpret_cast<PyCodeObject*>(code)->co_firstlineno;
  }
  Py_RETURN_NONE;
}

PyObject* hook_codes(PyObject* obj, PyObject*) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  PyObject* out = PyList_New(0);
  if (out == nullptr) return nullptr;
  for (auto& kv : st.first_line) {
    if (PyList_Append(out, kv.first) < 0) {
      Py_DECREF(out);
      return nullptr;
    }
  }
  return out;
}

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

PyObject* hook_on_line(PyObject* obj, PyObject* const* args, Py_ssize_t n) {
  return monitor_event(obj, args, n, false);
}

PyObject* hook_on_leave(PyObject* obj, PyObject* const* args, Py_ssize_t n) {
  return monitor_event(obj, args, n, true);
}

PyObject* hook_keys(PyObject* obj, PyObject*) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(st.keys.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < st.keys.size(); ++i) {
    PyObject* s = PyUnicode_FromString(st.keys[i].c_str());
    if (s == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), s);
  }
  return out;
}

// [(code, line, hits, (value, ...)), ...] in the order of the keys.
PyObject* hook_records(PyObject* obj, PyObject*) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  PyObject* out = PyList_New(0);
  if (out == nullptr) return nullptr;
  for (auto& [code, lines] : st.stats) {
    for (auto& [line, ls] : lines) {
      PyObject* vals = PyTuple_New(static_cast<Py_ssize_t>(ls.values.size()));
      if (vals == nullptr) {
        Py_DECREF(out);
        return nullptr;
      }
      for (std::size_t i = 0; i < ls.values.size(); ++i)
        PyTuple_SET_ITEM(vals, static_cast<Py_ssize_t>(i), PyLong_FromLongLong(ls.values[i]));
      PyObject* row = Py_BuildValue("(OiLN)", code, line, static_cast<long long>(ls.hits), vals);
      if (row == nullptr || PyList_Append(out, row) < 0) {
        Py_XDECREF(row);
        Py_DECREF(out);
        return nullptr;
      }
      Py_DECREF(row);
    }
  }
  return out;
}

PyObject* hook_clear(PyObject* obj, PyObject* args, PyObject* kwargs) {
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  static const char* names[] = {"codes", nullptr};
  int codes = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:clear", const_cast<char**>(names), &codes))
    return nullptr;
  st.stats.clear();
  st.stack.clear();
  st.error.clear();
  if (codes != 0) drop_codes(st);
  Py_RETURN_NONE;
}

PyObject* get_enabled(PyObject* obj, void*) {
  return PyBool_FromLong(reinterpret_cast<Hook*>(obj)->st->enabled);
}

int set_enabled(PyObject* obj, PyObject* value, void*) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "enabled cannot be deleted");
    return -1;
  }
  const int on = PyObject_IsTrue(value);
  if (on < 0) return -1;
  State& st = *reinterpret_cast<Hook*>(obj)->st;
  st.enabled = on != 0;
  st.owner = PyThread_get_thread_ident();
  if (!st.enabled) st.stack.clear();
  return 0;
}

PyObject* get_device(PyObject* obj, void*) {
  auto* self = reinterpret_cast<Hook*>(obj);
  Py_INCREF(self->device);
  return self->device;
}

int set_device(PyObject* obj, PyObject* value, void*) {
  auto* self = reinterpret_cast<Hook*>(obj);
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "device cannot be deleted");
    return -1;
  }
  // The native reader takes an int; a Python sampler may take anything.
  int index = 0;
  if (PyLong_Check(value)) {
    const long v = PyLong_AsLong(value);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v > INT32_MAX) {
      PyErr_SetString(PyExc_ValueError, "device must be a non-negative index");
      return -1;
    }
    index = static_cast<int>(v);
  } else if (self->native != nullptr) {
    PyErr_SetString(PyExc_TypeError, "with native counters the device must be an int");
    return -1;
  }
  self->native_device = index;
  Py_INCREF(value);
  Py_SETREF(self->device, value);
  return 0;
}

// use_counters(address): read the counters through the native table at this address (see
// counters_abi.h), or through the Python sampler again with 0. Only before the first sample.
PyObject* hook_use_counters(PyObject* obj, PyObject* arg) {
  auto* self = reinterpret_cast<Hook*>(obj);
  State& st = *self->st;
  void* p = PyLong_AsVoidPtr(arg);
  if (p == nullptr && PyErr_Occurred()) return nullptr;
  if (st.samples != 0) {
    PyErr_SetString(PyExc_RuntimeError, "use_counters must be called before the first sample");
    return nullptr;
  }
  st.keys.clear();
  st.folds.clear();
  self->native = nullptr;
  if (p == nullptr) Py_RETURN_NONE;
  const auto* t = static_cast<const memsight_counters*>(p);
  if (t->abi != MEMSIGHT_COUNTERS_ABI || t->count <= 0 || t->names == nullptr ||
      t->read == nullptr || t->reset == nullptr) {
    PyErr_Format(PyExc_ValueError, "not a memsight counter table of ABI %d", MEMSIGHT_COUNTERS_ABI);
    return nullptr;
  }
  if (!PyLong_Check(self->device)) {
    PyErr_SetString(PyExc_TypeError, "with native counters the device must be an int");
    return nullptr;
  }
  for (int i = 0; i < t->count; ++i) {
    st.keys.emplace_back(t->names[i] != nullptr ? t->names[i] : "");
    st.folds.push_back(fold_for(st.keys.back()));
  }
  self->native = t;
  Py_RETURN_NONE;
}

PyObject* get_native(PyObject* obj, void*) {
  return PyBool_FromLong(reinterpret_cast<Hook*>(obj)->native != nullptr);
}

PyObject* get_error(PyObject* obj, void*) {
  const std::string& e = reinterpret_cast<Hook*>(obj)->st->error;
  if (e.empty()) Py_RETURN_NONE;
  return PyUnicode_FromString(e.c_str());
}

PyObject* get_samples(PyObject* obj, void*) {
  return PyLong_FromLongLong(reinterpret_cast<Hook*>(obj)->st->samples);
}

PyObject* get_events(PyObject* obj, void*) {
  return PyLong_FromLongLong(reinterpret_cast<Hook*>(obj)->st->events);
}

PyObject* get_depth(PyObject* obj, void*) {
  return PyLong_FromSize_t(reinterpret_cast<Hook*>(obj)->st->stack.size());
}

PyObject* get_tracing(PyObject* obj, void*) {
  return PyBool_FromLong(reinterpret_cast<Hook*>(obj)->st->tracing);
}

PyMethodDef hook_methods[] = {
    {"add_code", hook_add_code, METH_O, "Profile the lines of this code object."},
    {"codes", hook_codes, METH_NOARGS, "The profiled code objects."},
    {"start_trace", hook_start_trace, METH_NOARGS,
     "Install the C trace function on this thread (chains to the current tracer)."},
    {"stop_trace", hook_stop_trace, METH_NOARGS,
     "Restore the previous tracer; False if another one replaced ours since."},
    {"on_start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(hook_on_start)),
     METH_FASTCALL, "A profiled function starts or resumes: (code, offset)."},
    {"on_line", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(hook_on_line)),
     METH_FASTCALL, "A new line starts: (code, line)."},
    {"on_leave", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(hook_on_leave)),
     METH_FASTCALL, "A profiled function returns, yields or unwinds: (code, offset, value)."},
    {"keys", hook_keys, METH_NOARGS, "The names of the sampled counters."},
    {"use_counters", hook_use_counters, METH_O,
     "Read the counters through a native table (its address; 0: the sampler again)."},
    {"records", hook_records, METH_NOARGS, "[(code, line, hits, values)], max over calls."},
    {"clear", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(hook_clear)),
     METH_VARARGS | METH_KEYWORDS, "Forget the records (and the code objects if codes=True)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef hook_getset[] = {
    {"enabled", get_enabled, set_enabled, "Whether events are recorded.", nullptr},
    {"device", get_device, set_device, "The argument passed to the sampler.", nullptr},
    {"error", get_error, nullptr, "The first failure of the sampler, or None.", nullptr},
    {"samples", get_samples, nullptr, "How many samples were taken.", nullptr},
    {"events", get_events, nullptr, "How many events reached the hook while enabled.", nullptr},
    {"depth", get_depth, nullptr, "How many profiled frames are running.", nullptr},
    {"tracing", get_tracing, nullptr, "Whether the C trace function is installed.", nullptr},
    {"native", get_native, nullptr, "Whether a native counter table is in use.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot hook_slots[] = {
    {Py_tp_doc,
     const_cast<char*>("Hook(sampler, resetters=(), device=0): per-line memory statistics.")},
    {Py_tp_new, reinterpret_cast<void*>(hook_new)},
    {Py_tp_init, reinterpret_cast<void*>(hook_init)},
    {Py_tp_dealloc, reinterpret_cast<void*>(hook_dealloc)},
    {Py_tp_methods, hook_methods},
    {Py_tp_getset, hook_getset},
    {0, nullptr}};

PyType_Spec hook_spec = {"memsight._linehook.Hook", sizeof(Hook), 0, Py_TPFLAGS_DEFAULT,
                         hook_slots};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "_linehook",
                          "Per-line memory bookkeeping for memsight.torch.LineProfiler.",
                          -1,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

}  // namespace
}  // namespace memsight::linehook

PyMODINIT_FUNC PyInit__linehook() {
  PyObject* m = PyModule_Create(&memsight::linehook::module_def);
  if (m == nullptr) return nullptr;
  PyObject* type = PyType_FromSpec(&memsight::linehook::hook_spec);
  if (type == nullptr || PyModule_AddObject(m, "Hook", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
