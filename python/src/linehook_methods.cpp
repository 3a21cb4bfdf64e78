// The methods of memsight._linehook.Hook that set it up (sampler, device,
// native counters, code objects) and read its records, its type and the
// module. The events of the per-line path are in linehook.cpp.
#include <cstdint>
#include <new>
#include <string>

#include "linehook_hook.h"

namespace memsight::linehook {
namespace {

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
