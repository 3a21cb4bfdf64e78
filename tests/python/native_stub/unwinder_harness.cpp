// torch's side of the Python-unwinder interface, for the unwinder's test
// (tests/python/test_python_unwinder.py): the chain of unwinders that
// CapturedTraceback::gather() asks in turn, symbolize() for Python frames,
// and a reference unwinder that reads frames the way torch's does, through
// the C API with the GIL held (PyEval_GetFrame, PyFrame_GetBack,
// PyFrame_GetLasti, then PyCode_Addr2Line when symbolising).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <unordered_map>

#include "torch/csrc/profiler/combined_traceback.h"

namespace torch {
namespace {
std::atomic<CapturedTraceback::Python*> chain{nullptr};

struct Reference final : CapturedTraceback::Python {
  bool canGather() override { return true; }
  std::vector<CapturedTraceback::PyFrame> gather() override {
    PyGILState_STATE g = PyGILState_Ensure();
    std::vector<CapturedTraceback::PyFrame> out;
    PyFrameObject* f = PyEval_GetFrame();
    Py_XINCREF(f);
    while (f) {
      PyCodeObject* code = PyFrame_GetCode(f);  // a new reference, kept
      out.push_back({code, PyFrame_GetLasti(f)});
      PyFrameObject* back = PyFrame_GetBack(f);
      Py_DECREF(f);
      f = back;
    }
    PyGILState_Release(g);
    return out;
  }
  void release(std::vector<CapturedTraceback::PyFrame>&) override {}  // leaks: a test
  void appendSymbolized(const std::vector<CapturedTraceback::PyFrame>& fs,
                        SymbolizedTracebacks& st) override {
    PyGILState_STATE g = PyGILState_Ensure();
    for (const auto& f : fs) {
      auto* code = static_cast<PyCodeObject*>(f.code);
      st.tracebacks.push_back({st.all_frames.size()});
      st.all_frames.push_back({PyUnicode_AsUTF8(code->co_filename), PyUnicode_AsUTF8(code->co_name),
                               static_cast<uint64_t>(PyCode_Addr2Line(code, f.lasti))});
    }
    PyGILState_Release(g);
  }
  int traverse(std::vector<CapturedTraceback::PyFrame>&, CapturedTraceback::visitproc,
               void*) override {
    return 0;
  }
  int clear(std::vector<CapturedTraceback::PyFrame>&) override { return 0; }
};
}  // namespace

void CapturedTraceback::addPythonUnwinder(Python* p) {
  p->next_ = chain.load();
  chain.store(p);
}

// torch registers its own unwinder when it is imported, before any other.
const bool reference_installed = (CapturedTraceback::addPythonUnwinder(new Reference()), true);

std::shared_ptr<CapturedTraceback> CapturedTraceback::gather(bool python, bool, bool) {
  auto r = std::make_shared<CapturedTraceback>();
  for (Python* p = python ? chain.load() : nullptr; p && r->frames_.empty(); p = p->next_) {
    if (p->canGather()) {
      r->frames_ = p->gather();
      r->python_ = p;
    }
  }
  return r;
}

SymbolizedTracebacks symbolize(const std::vector<CapturedTraceback*>& tbs) {
  SymbolizedTracebacks r;
  std::vector<std::vector<uint64_t>> out;
  for (CapturedTraceback* tb : tbs) {
    out.emplace_back();
    if (!tb->python_) continue;
    SymbolizedTracebacks one;
    tb->python_->appendSymbolized(tb->frames_, one);
    for (const auto& fragment : one.tracebacks)
      for (uint64_t i : fragment) {
        out.back().push_back(r.all_frames.size());
        r.all_frames.push_back(one.all_frames[i]);
      }
  }
  r.tracebacks = std::move(out);
  return r;
}
}  // namespace torch

// For bench/unwinder_gather_bench.py: gathers the calling thread's stack n
// times as torch's allocator does, keeping the last `ring` tracebacks alive
// (torch's ring buffer: each new entry destroys the oldest) and, between
// gathers, writing `pollute_kb` KiB of other memory (the rest of a training
// step's work, which evicts the unwinder's data from the caches). Returns the
// nanoseconds spent in gather and in destroying the oldest, only.
#include <chrono>
#include <deque>

extern "C" __attribute__((visibility("default"))) long long memsight_harness_gather_ns(
    int n, int ring, int pollute_kb) {
  std::deque<std::shared_ptr<torch::CapturedTraceback>> kept;
  std::vector<char> other(static_cast<size_t>(pollute_kb) * 1024 + 1);
  long long ns = 0;
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k + 1 < other.size(); k += 64) other[k] = static_cast<char>(other[k] + i);
    auto t0 = std::chrono::steady_clock::now();
    kept.push_back(torch::CapturedTraceback::gather(true, false, false));
    if (static_cast<int>(kept.size()) > ring) kept.pop_front();
    ns +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
  }
  return ns + other[0] * 0;
}
