// The bookkeeping behind memsight._linehook (see linehook_state.h).
#include "linehook_state.h"

#include <algorithm>

namespace memsight::linehook {

Fold fold_for(const std::string& key) {
  auto ends = [&key](const char* suffix) {
    const std::string s(suffix);
    return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".peak")) return Fold::kMax;
  if (ends("allocated") || ends("freed")) return Fold::kSum;
  return Fold::kLatest;
}

// Appends the integer leaves of a (nested) dict to out; names them when keys != nullptr.
bool flatten(PyObject* dict, const std::string& prefix, std::vector<std::int64_t>& out,
             std::vector<std::string>* keys) {
  PyObject* k = nullptr;
  PyObject* v = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict, &pos, &k, &v)) {
    std::string name;
    if (keys != nullptr) {
      const char* s = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : nullptr;
      if (s == nullptr) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "memory statistics must have string keys");
        return false;
      }
      name = prefix + s;
    }
    if (PyDict_Check(v)) {
      if (!flatten(v, name + ".", out, keys)) return false;
      continue;
    }
    std::int64_t x = 0;
    if (PyFloat_Check(v)) {
      x = static_cast<std::int64_t>(PyFloat_AS_DOUBLE(v));
    } else {
      int overflow = 0;
      x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (x == -1 && PyErr_Occurred()) return false;
      if (overflow != 0) x = overflow > 0 ? INT64_MAX : INT64_MIN;  // e.g. an unset size limit
    }
    out.push_back(x);
    if (keys != nullptr) keys->push_back(name);
  }
  return true;
}

// Records the pending exception and stops sampling; the job itself goes on.
// KeyboardInterrupt and SystemExit are left pending (returns false): they stop the job.
bool fail(State& st, const char* what) {
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || PyErr_ExceptionMatches(PyExc_SystemExit))
    return false;
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  std::string msg = what;
  if (value != nullptr) {
    PyObject* s = PyObject_Str(value);
    const char* c = s != nullptr ? PyUnicode_AsUTF8(s) : nullptr;
    if (c != nullptr) msg += std::string(": ") + c;
    Py_XDECREF(s);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();
  if (st.error.empty()) st.error = msg;
  st.enabled = false;
  st.stack.clear();
  return true;
}

void fold_into(std::vector<std::int64_t>& acc, bool& has, const State& st) {
  if (!has) {
    acc = st.sample;
    has = true;
    return;
  }
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const std::int64_t v = st.sample[i];
    switch (st.folds[i]) {
      case Fold::kMax:
        acc[i] = std::max(acc[i], v);
        break;
      case Fold::kSum:
        acc[i] += v;
        break;
      case Fold::kLatest:
        acc[i] = v;
        break;
    }
  }
}

void push(State& st, PyObject* key, PyObject* code) {
  auto it = st.first_line.find(code);
  if (it == st.first_line.end()) return;
  st.stack.push_back(Active{key, it->first, it->second, false, {}});
}

bool top_is(const State& st, PyObject* key) {
  return !st.stack.empty() && st.stack.back().key == key;
}

bool mine(const State& st) { return st.enabled && PyThread_get_thread_ident() == st.owner; }

void drop_codes(State& st) {
  for (auto& kv : st.first_line) Py_DECREF(kv.first);
  st.first_line.clear();
}

}  // namespace memsight::linehook
