// A stand-in for the part of torch's torch/csrc/profiler/combined_traceback.h
// (torch 2.11) that memsight/torch/native/python_unwinder.cpp uses, so the
// unwinder's frame walk is tested on machines without torch's C++ headers
// (tests/python/test_python_unwinder.py). unwinder_harness.cpp implements
// gather() and symbolize() the way torch does for Python frames.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace c10 {
struct GatheredContext {
  virtual ~GatheredContext() = default;
};
}  // namespace c10

namespace torch {
namespace unwind {
struct Frame {
  std::string filename, funcname;
  uint64_t lineno;
};
}  // namespace unwind

struct SymbolizedTracebacks {
  std::vector<unwind::Frame> all_frames;
  std::vector<std::vector<uint64_t>> tracebacks;
};

struct CapturedTraceback : public c10::GatheredContext {
  struct PyFrame {
    void* code;
    int lasti;
  };
  using visitproc = int (*)(void* self, void* arg);
  struct Python {
    virtual bool canGather() = 0;
    virtual std::vector<PyFrame> gather() = 0;
    virtual void release(std::vector<PyFrame>& frames) = 0;
    virtual void appendSymbolized(const std::vector<PyFrame>& to_symbolize,
                                  SymbolizedTracebacks& st) = 0;
    virtual int traverse(std::vector<PyFrame>& frames, visitproc visit, void* arg) = 0;
    virtual int clear(std::vector<PyFrame>& frames) = 0;
    virtual ~Python() = default;
    Python* next_ = nullptr;
  };
  static std::shared_ptr<CapturedTraceback> gather(bool python, bool script, bool cpp);
  static void addPythonUnwinder(Python* p);

  std::vector<PyFrame> frames_;
  Python* python_ = nullptr;
};

SymbolizedTracebacks symbolize(const std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch
