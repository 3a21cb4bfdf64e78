// The bookkeeping behind memsight._linehook: which profiled frames are
// running, the counters folded since each one's last line, and each line's
// statistics. No Python objects are created here.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace memsight::linehook {

enum class Fold : std::uint8_t { kLatest, kMax, kSum };

struct Active {
  PyObject* key;   // the frame (trace path) or the code object (monitoring path), borrowed
  PyObject* code;  // borrowed: owned by State::first_line
  int prev_line;
  bool has_acc;
  std::vector<std::int64_t> acc;
};

struct LineStats {
  std::int64_t hits = 0;
  std::vector<std::int64_t> values;
};

struct State {
  std::unordered_map<PyObject*, int> first_line;  // owned references to code objects
  std::vector<std::string> keys;
  std::vector<Fold> folds;
  std::vector<std::int64_t> sample;
  std::vector<Active> stack;
  std::unordered_map<PyObject*, std::map<int, LineStats>> stats;
  bool enabled = false;
  bool tracing = false;
  unsigned long owner = 0;  // the thread whose events are recorded
  Py_tracefunc saved_func = nullptr;
  PyObject* saved_obj = nullptr;  // owned
  std::string error;
  std::int64_t samples = 0;
  std::int64_t events = 0;
};

// "*.peak" keeps the maximum, "*allocated" / "*freed" are summed, the rest keeps its latest value.
Fold fold_for(const std::string& key);

// Appends the integer leaves of a (nested) dict to out; names them when keys != nullptr.
bool flatten(PyObject* dict, const std::string& prefix, std::vector<std::int64_t>& out,
             std::vector<std::string>* keys);

// Records the pending exception and stops sampling; the job itself goes on.
// KeyboardInterrupt and SystemExit are left pending (returns false): they stop the job.
bool fail(State& st, const char* what);

// Folds the latest sample into a frame's accumulator.
void fold_into(std::vector<std::int64_t>& acc, bool& has, const State& st);

// A profiled frame starts (nothing happens for other code objects).
void push(State& st, PyObject* key, PyObject* code);
bool top_is(const State& st, PyObject* key);
// Whether this thread's events are recorded.
bool mine(const State& st);
// Releases the code objects.
void drop_codes(State& st);

}  // namespace memsight::linehook
