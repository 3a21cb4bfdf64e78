// libFuzzer target, differential against CPython's pickle.loads (embedded):
// an input the snapshot reader accepts, written back by the writer, loads in
// Python into a value equal to what pickle.loads makes of the input itself;
// an input pickle.loads refuses, memsight refuses too; and an input
// pickle.loads accepts is never called corrupted or truncated by memsight
// (it may be refused as no snapshot, as too deep, or for a type memsight
// does not read); one whose counted opcode declares more bytes than remain
// is refused by memsight (Python refuses it as truncated, and is not asked:
// it would allocate what is declared first). An input with an opcode that
// imports or calls something (GLOBAL, REDUCE, BUILD, ...) counts as refused
// by Python without being asked; pickle.loads reads the others, so no input
// can make it run code.
#include <Python.h>
#include <sanitizer/lsan_interface.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "memsight/error.h"
#include "memsight/reader.h"
#include "memsight/text_tools.h"

namespace {

// same(a, b): equal values of the same types, in the same order, -0.0 and
// nan told apart as pickle keeps them; bytes and bytearray alike (memsight
// reads both as bytes). load(b): the value, or None when refused; a third
// item says whether it was refused for being too deep to compare.
constexpr const char* kPython = R"(
import io, math, pickle, pickletools, sys
sys.setrecursionlimit(5000)
def askable(b):
    # CPython's unpickler allocates what a counted opcode declares before it
    # reads it, and a memo as long as the largest index put: a few bytes
    # declaring petabytes abort the sanitizer (allocation-size-too-big)
    # where Python would raise MemoryError. Such inputs are not asked. None:
    # a length declares more bytes than remain before STOP, which Python
    # refuses as truncated without being asked (so memsight must refuse too).
    try:
        for op, arg, pos in pickletools.genops(b):
            if op.name in ('BINPUT', 'LONG_BINPUT') and arg > len(b):
                return False
    except ValueError as e:
        return None if 'remain' in str(e) or 'maxsize' in str(e) else True
    except Exception:
        pass
    return True
# The opcodes that would call or import something: an input holding one
# (before STOP) is refused unasked, as an Unpickler whose find_class refuses
# everything would refuse it. Every other input goes to pickle.loads itself,
# which then can call nothing: an Unpickler reading a file is not the same
# reader (CPython 3.11 reads an opcode that straddles a frame's end from
# past the frame, dropping the frame's last bytes, where pickle.loads reads
# the bytes as they are).
_CALLS = {'GLOBAL', 'STACK_GLOBAL', 'INST', 'OBJ', 'REDUCE', 'BUILD', 'NEWOBJ',
          'NEWOBJ_EX', 'EXT1', 'EXT2', 'EXT4', 'PERSID', 'BINPERSID'}
def calls(b):
    try:
        for op, arg, pos in pickletools.genops(b):
            if op.name in _CALLS:
                return True
    except Exception:
        pass
    return False
def load(b):
    if calls(b):
        return (False, None)
    try:
        return (True, pickle.loads(b))
    except RecursionError:
        raise
    except Exception:
        return (False, None)
def same(a, b, seen=None):
    if isinstance(a, float) and isinstance(b, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (a != a and b != b))
    if isinstance(a, (bytes, bytearray)) and isinstance(b, (bytes, bytearray)):
        return bytes(a) == bytes(b)
    if type(a) is not type(b):
        return False
    if not isinstance(a, (list, tuple, dict)):
        return bool(a == b)
    # A pair of containers compared once: a few bytes of pickle can refer
    # to one list 2^n times (chained references), which a plain walk would
    # visit 2^n times.
    if seen is None:
        seen = {}
    key = (id(a), id(b))
    if key in seen:
        return seen[key]
    if isinstance(a, dict):
        ok = list(a) == list(b) and all(same(a[k], b[k], seen) for k in a)
    else:
        ok = len(a) == len(b) and all(same(x, y, seen) for x, y in zip(a, b))
    seen[key] = ok
    return ok
def check(original, written):
    # 0: agree (or not askable); 1: values differ; 2: too deep for Python to
    # compare (skipped); 3: Python loads what memsight refused; 4: Python
    # refuses what memsight read.
    asked = askable(original)
    if asked is None:
        return 4 if written is not None else 0
    if not asked:
        return 0
    try:
        ok, want = load(original)
        if written is None:
            return 3 if ok else 0
        if not ok:
            return 4
        ok2, got = load(written)
        return 0 if ok2 and same(want, got) else 1
    except RecursionError:
        return 2
)";

PyObject* g_check = nullptr;

int python_check(std::string_view original, const std::string* written) {
  __lsan::ScopedDisabler no_leak_checks;  // the interpreter's caches live on
  PyObject* a =
      PyBytes_FromStringAndSize(original.data(), static_cast<Py_ssize_t>(original.size()));
  PyObject* b =
      written ? PyBytes_FromStringAndSize(written->data(), static_cast<Py_ssize_t>(written->size()))
              : Py_NewRef(Py_None);
  PyObject* r = PyObject_CallFunctionObjArgs(g_check, a, b, nullptr);
  Py_DECREF(a);
  Py_DECREF(b);
  if (!r) {
    PyErr_Print();
    std::abort();
  }
  long v = PyLong_AsLong(r);
  Py_DECREF(r);
  return static_cast<int>(v);
}

// A refusal that says the bytes are no valid pickle (as opposed to no
// snapshot, a limit, a type memsight does not read, or a pickle without the
// PROTO header of protocols 2-5, which memsight does not take for one).
bool says_invalid(const std::string& message) {
  for (const char* what : {"corrupted pickle", "truncated pickle"})
    if (message.find(what) != std::string::npos)
      return message.find("nested deeper than") == std::string::npos &&
             message.find("is absurd") == std::string::npos &&
             message.find("values wait on the pickle stack") == std::string::npos;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __lsan::ScopedDisabler no_leak_checks;
  Py_InitializeEx(0);
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* r = PyRun_String(kPython, Py_file_input, globals, globals);
  if (!r) {
    PyErr_Print();
    std::abort();
  }
  Py_DECREF(r);
  g_check = PyDict_GetItemString(globals, "check");
  Py_INCREF(g_check);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string written;
  std::string refusal;
  bool accepted = true;
  try {
    written = memsight::pickle_snapshot(memsight::read_snapshot_bytes(in));
  } catch (const memsight::Error& e) {
    accepted = false;
    refusal = e.what();
  }
  int verdict = python_check(in, accepted ? &written : nullptr);
  if (verdict == 1) std::abort();                           // values differ
  if (verdict == 4) std::abort();                           // Python refuses what memsight read
  if (verdict == 3 && says_invalid(refusal)) std::abort();  // a valid pickle called invalid
  return 0;
}
