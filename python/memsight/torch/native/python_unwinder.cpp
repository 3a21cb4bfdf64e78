// A Python unwinder for torch's allocator history that does not take the GIL.
//
// torch records a Python stack for each allocator event through
// torch::CapturedTraceback::gather(), which asks the registered Python
// unwinders in turn. torch's own takes the GIL (from a thread that has just
// released it to run the operator), walks the frames through the C API
// (materialising a frame object for each) and holds a reference to each
// code object; bench/recording_overhead.py measured ~4-5 us of host time an
// event on a transformers step (docs/dumps.md). This unwinder is registered
// ahead of torch's and reads the calling thread's own frame chain instead:
// while the thread is inside torch's allocator its Python frames cannot
// change, so no lock is needed to read them. Each distinct stack is resolved
// once (file, function, line) into records that live as long as the process,
// so what torch stores per event is a vector of (record, line) pairs and the
// symbolisation later reads only those records. An event reads the frames
// only, never their code objects (cold in a training step's cache); from
// Python 3.12 a code object's death is told to a code watcher, which retires
// the stacks that name it, so an address reused by another code object is
// never mistaken for it (3.11 compares each hit's code objects instead).
//
// Everything else stays torch's: its ring buffer and max_entries, the
// blocks' stacks, CUDA graphs' pools, expandable segments, C++ frames
// (stacks="all"), the snapshot. A thread with no Python frames (autograd's)
// gets one marker frame that symbolises to nothing, so its entries read as
// torch's do ("frames": []).
//
// Built on first use against the installed torch and Python
// (memsight/torch/capture/_native_record.py) and loaded with ctypes. Only
// CPython 3.11 and 3.12 frame layouts are read; elsewhere the build fails and
// torch's unwinder stays in use. memsight_unwinder_check() compares this
// unwinder with torch's on live stacks before it is ever enabled.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "memsight's Python unwinder reads the frame layout of CPython 3.11 and 3.12 only"
#endif
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include <torch/csrc/profiler/combined_traceback.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using torch::CapturedTraceback;
using PyFrame = CapturedTraceback::PyFrame;

// A code object's name and file, copied when first seen; never freed, since
// tracebacks point at it for as long as torch keeps them. The object
// pointers say which code object it was taken from: a code object that dies
// and another born at its address differ in at least one of them, unless
// they are the same function compiled again (same names, same lines).
struct CodeRecord {
  const PyObject* filename_obj;
  const PyObject* name_obj;
  const PyObject* linetable_obj;
  int firstlineno;
  std::string filename, name;
};

// Marks "this thread has no Python frames": it stops torch from asking the
// next unwinder (which would take the GIL to find none) and symbolises to
// no frames at all.
CodeRecord no_frames{nullptr, nullptr, nullptr, 0, {}, {}};

// A str's text as UTF-8, read without the GIL: the compact forms' data is
// never changed once made; nothing is cached on the object.
std::string utf8_of(PyObject* s) {
  if (s == nullptr || !PyUnicode_Check(s)) return "??";
  Py_ssize_t n = PyUnicode_GET_LENGTH(s);
  if (PyUnicode_IS_ASCII(s)) return std::string(static_cast<const char*>(PyUnicode_DATA(s)), n);
  int kind = PyUnicode_KIND(s);
  const void* data = PyUnicode_DATA(s);
  std::string out;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

bool same_code(const CodeRecord* r, const PyCodeObject* co) {
  return r->filename_obj == co->co_filename && r->name_obj == co->co_name &&
         r->linetable_obj == co->co_linetable && r->firstlineno == co->co_firstlineno;
}

// One step of a walk: the code object and where in it the frame is, read
// from the frame alone. A walk never reads the code objects themselves: in a
// training step they are cold in the cache (measured: ~2 us an event on a
// transformers step against ~0.8 us in a hot loop), so what needs them is
// decided once per distinct stack, when it is resolved.
struct RawFrame {
  PyCodeObject* code;
  int lasti;       // in code units, as _PyInterpreterFrame_LASTI gives it
  bool generator;  // the frame belongs to a generator or coroutine
  bool operator==(const RawFrame& o) const {
    return code == o.code && lasti == o.lasti && generator == o.generator;
  }
};

// Whether the frame has started running its code; PyEval_GetFrame and
// PyFrame_GetBack skip the others (_PyFrame_IsIncomplete, from what a walk kept).
bool complete(const RawFrame& f) { return f.generator || f.lasti >= f.code->_co_firsttraceable; }

// What a compact event's one frame holds in lasti: its code is the Stack. A
// real lasti is -1 or more.
constexpr int kWholeStack = -2;

// A resolved stack: the raw frames it was found from, and what torch keeps.
// `valid` turns false when one of its code objects dies (code watchers):
// another may then be born at the same address.
struct Stack {
  std::vector<RawFrame> raw;
  std::vector<PyFrame> frames;
  uint64_t check = 0;  // the walk's second hash
  const Stack* next_same_hash = nullptr;
  bool valid = true;
};

class Unwinder final : public CapturedTraceback::Python {
 public:
  // Read by every thread at every event: on a cache line of its own, apart
  // from the counters the gathering threads write.
  alignas(64) std::atomic<bool> enabled{false};
  // One frame per event standing for the whole stack (its id), expanded when
  // symbolised: torch stores and later frees 16 bytes an event instead of a
  // copy of every frame. Only where torch interleaves no C++ frames: with
  // stacks="all" it places each Python frame at an interpreter's C++ frame.
  // Where code deaths are watched, a hit is then found by the walk's hashes
  // alone, without comparing the frames.
  std::atomic<bool> compact{false};
  // Whether code objects' deaths are watched (3.12): then a stack found is
  // valid without reading its code objects.
  std::atomic<bool> watched{false};
  alignas(64) std::atomic<uint64_t> gathered{0}, resolved{0};

  // Not while the interpreter shuts down: thread states are being torn down.
  bool canGather() override {
    return enabled.load(std::memory_order_relaxed) && Py_IsInitialized() && !_Py_IsFinalizing();
  }

  std::vector<PyFrame> gather() override {
    gathered.fetch_add(1, std::memory_order_relaxed);
    thread_local std::vector<RawFrame> raw;
    raw.clear();
    auto [hash, check] = walk(raw);
    if (raw.empty()) return {PyFrame{&no_frames, 0}};
    std::lock_guard<std::mutex> lock(mutex_);
    const Stack* s = find_or_resolve(raw, hash, check);
    if (compact.load(std::memory_order_relaxed))
      return {PyFrame{const_cast<Stack*>(s), kWholeStack}};
    return s->frames;
  }

  // A code object dies (3.12's code watchers, with the GIL held): the stacks
  // that name it are no longer found by its address.
  void code_destroyed(const PyCodeObject* co) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = users_.find(co);
    if (it == users_.end()) return;
    for (Stack* s : it->second) s->valid = false;
    users_.erase(it);
    by_code_.erase(co);
  }

  void release(std::vector<PyFrame>&) override {}  // nothing referenced

  void appendSymbolized(const std::vector<PyFrame>& to_symbolize,
                        torch::SymbolizedTracebacks& st) override {
    for (const PyFrame& f : to_symbolize) {
      st.tracebacks.emplace_back();
      if (f.lasti != kWholeStack) {
        append_frame(f, st);
        continue;
      }
      // A stack is never freed, and a retired one still names what it named.
      for (const PyFrame& g : static_cast<const Stack*>(f.code)->frames) append_frame(g, st);
    }
  }

  static void append_frame(const PyFrame& f, torch::SymbolizedTracebacks& st) {
    const auto* r = static_cast<const CodeRecord*>(f.code);
    if (r == &no_frames) return;
    st.tracebacks.back().push_back(st.all_frames.size());
    torch::unwind::Frame frame;
    frame.filename = r->filename;
    frame.funcname = r->name;
    frame.lineno = static_cast<uint64_t>(f.lasti);
    st.all_frames.emplace_back(std::move(frame));
  }

  int traverse(std::vector<PyFrame>&, CapturedTraceback::visitproc, void*) override { return 0; }
  int clear(std::vector<PyFrame>&) override { return 0; }

  size_t stacks() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stacks_.size();
  }

 private:
  std::mutex mutex_;
  std::deque<Stack> stacks_;
  std::unordered_map<uint64_t, const Stack*> by_hash_;
  std::deque<CodeRecord> records_;
  std::unordered_map<const PyCodeObject*, const CodeRecord*> by_code_;
  std::unordered_map<const PyCodeObject*, std::vector<Stack*>> users_;  // when watched

  // The calling thread's frames, innermost first, the incomplete ones too
  // (resolving drops them, as torch's unwinder skips them); returns two
  // independent 64-bit hashes of them, which name the stack: comparing the
  // frames themselves at each hit would read a cold kilobyte an event. Only
  // the frames are read, never their code objects.
  static std::pair<uint64_t, uint64_t> walk(std::vector<RawFrame>& raw) {
    PyThreadState* ts = PyGILState_GetThisThreadState();
    if (ts == nullptr || ts->cframe == nullptr) return {0, 0};
    uint64_t h = 1469598103934665603ull, g = 0x9E3779B97F4A7C15ull;
    for (_PyInterpreterFrame* f = ts->cframe->current_frame; f; f = f->previous) {
      int lasti = _PyInterpreterFrame_LASTI(f);  // pointer arithmetic: the code is not read
      bool generator = f->owner == FRAME_OWNED_BY_GENERATOR;
      raw.push_back({f->f_code, lasti, generator});
      uint64_t code = reinterpret_cast<uintptr_t>(f->f_code);
      uint64_t where = static_cast<uint32_t>(lasti) << 1 | generator;
      h = (h ^ code) * 1099511628211ull;
      h = (h ^ where) * 1099511628211ull;
      g = mix(g + code) ^ mix(g + (where << 32 | raw.size()));
    }
    return {h, g};
  }

  // splitmix64's finaliser: a second hash unrelated to FNV's.
  static uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  const Stack* find_or_resolve(const std::vector<RawFrame>& raw, uint64_t hash, uint64_t check) {
    auto it = by_hash_.find(hash);
    const Stack* head = it == by_hash_.end() ? nullptr : it->second;
    bool watching = watched.load(std::memory_order_relaxed);
    // By the hashes alone only with stack ids (checked on the CPU stand-in,
    // not yet against torch on the GPU); else the frames are compared too.
    bool by_hashes = watching && compact.load(std::memory_order_relaxed);
    for (const Stack* s = head; s; s = s->next_same_hash)
      if (s->valid && s->check == check && s->raw.size() == raw.size() &&
          (by_hashes || (watching ? s->raw == raw : still_valid(*s, raw))))
        return s;
    Stack& s = stacks_.emplace_back();
    s.raw = raw;
    s.check = check;
    for (const RawFrame& f : raw) {
      if (!complete(f)) continue;
      // in bytes, as PyFrame_GetLasti gives it; PyCode_Addr2Line only reads the line table
      int line = PyCode_Addr2Line(f.code, f.lasti < 0 ? -1 : f.lasti * int(sizeof(_Py_CODEUNIT)));
      s.frames.push_back(PyFrame{const_cast<CodeRecord*>(record_of(f.code)), line});
    }
    // Every code object of the walk is part of the stack's identity, the
    // incomplete frames' too (another code at that address may be complete).
    if (watching)
      for (const RawFrame& f : raw) users_[f.code].push_back(&s);
    if (s.frames.empty()) s.frames.push_back(PyFrame{&no_frames, 0});  // nothing had started
    s.next_same_hash = head;
    by_hash_[hash] = &s;
    resolved.fetch_add(1, std::memory_order_relaxed);
    return &s;
  }

  // The frames' code objects are the ones the stack was resolved from
  // (where deaths are not watched: each hit reads every code object).
  static bool still_valid(const Stack& s, const std::vector<RawFrame>& raw) {
    if (s.raw != raw) return false;
    size_t k = 0;
    for (const RawFrame& f : raw) {
      if (!complete(f)) continue;
      if (k == s.frames.size()) return false;  // another code here, complete where it was not
      const auto* r = static_cast<const CodeRecord*>(s.frames[k++].code);
      if (r == &no_frames || !same_code(r, f.code)) return false;
    }
    return true;
  }

  const CodeRecord* record_of(PyCodeObject* co) {
    auto it = by_code_.find(co);
    if (it != by_code_.end() && same_code(it->second, co)) return it->second;
    CodeRecord& r = records_.emplace_back(CodeRecord{co->co_filename, co->co_name, co->co_linetable,
                                                     co->co_firstlineno, utf8_of(co->co_filename),
                                                     utf8_of(co->co_name)});
    by_code_[co] = &r;
    return &r;
  }
};

std::atomic<Unwinder*> the_unwinder{nullptr};

#if PY_VERSION_HEX >= 0x030C0000
int on_code_event(PyCodeEvent event, PyCodeObject* co) {
  Unwinder* u = the_unwinder.load();
  if (event == PY_CODE_EVENT_DESTROY && u != nullptr) u->code_destroyed(co);
  return 0;
}
#endif

// From 3.12 a code object's death is told to its watchers: a stack found is
// then known valid without reading its code objects at each event.
void watch_code_deaths(Unwinder* u) {
#if PY_VERSION_HEX >= 0x030C0000
  if (!Py_IsInitialized()) return;
  PyGILState_STATE g = PyGILState_Ensure();  // callers come through ctypes, without the GIL
  int id = PyCode_AddWatcher(on_code_event);
  if (id < 0) PyErr_Clear();  // all eight taken: each hit reads the code objects instead
  PyGILState_Release(g);
  u->watched.store(id >= 0);
#elif defined(MEMSIGHT_BENCH_ASSUME_WATCHED)
  // bench/unwinder_gather_bench.py only: what 3.12's watchers spare a hit,
  // measured where there are none (a code object's death goes unseen here)
  u->watched.store(true);
#else
  (void)u;
#endif
}

Unwinder* unwinder() {
  static Unwinder* u = [] {
    auto* p = new Unwinder();  // immortal: torch keeps pointers to it
    the_unwinder.store(p);
    watch_code_deaths(p);
    CapturedTraceback::addPythonUnwinder(p);
    return p;
  }();
  return u;
}

void set_error(char* err, int err_len, const std::string& what) {
  if (err && err_len > 0) std::snprintf(err, static_cast<size_t>(err_len), "%s", what.c_str());
}

std::vector<torch::unwind::Frame> symbolized(const std::shared_ptr<CapturedTraceback>& tb) {
  torch::SymbolizedTracebacks st = torch::symbolize({tb.get()});
  std::vector<torch::unwind::Frame> out;
  for (uint64_t i : st.tracebacks.at(0)) out.push_back(st.all_frames.at(i));
  return out;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int memsight_unwinder_abi(void) { return 3; }

// Whether an event's stack is one frame standing for the whole stack (its id).
__attribute__((visibility("default"))) void memsight_unwinder_compact(int on) {
  unwinder()->compact.store(on != 0);
}

// Registers the unwinder (once; disabled) and sets whether it answers.
__attribute__((visibility("default"))) void memsight_unwinder_enable(int on) {
  unwinder()->enabled.store(on != 0);
}

// Gathers the calling thread's Python stack with torch's unwinder and with
// this one and compares the symbolised frames. Called without the GIL
// (torch's unwinder takes it). 0: equal, with how many frames; -1: differs
// or failed, with a message.
__attribute__((visibility("default"))) int memsight_unwinder_check(int* frames, char* err,
                                                                   int err_len) {
  try {
    Unwinder* u = unwinder();
    bool was = u->enabled.exchange(false);
    auto theirs = CapturedTraceback::gather(true, false, false);
    u->enabled.store(true);
    auto ours = CapturedTraceback::gather(true, false, false);
    u->enabled.store(was);
    std::vector<torch::unwind::Frame> a = symbolized(ours), b = symbolized(theirs);
    *frames = static_cast<int>(a.size());
    if (a.size() != b.size()) {
      set_error(err, err_len,
                std::to_string(a.size()) + " frames against torch's " + std::to_string(b.size()));
      return -1;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].filename != b[i].filename || a[i].funcname != b[i].funcname ||
          a[i].lineno != b[i].lineno) {
        set_error(err, err_len,
                  "frame " + std::to_string(i) + ": " + a[i].funcname + " " + a[i].filename + ":" +
                      std::to_string(a[i].lineno) + " against torch's " + b[i].funcname + " " +
                      b[i].filename + ":" + std::to_string(b[i].lineno));
        return -1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    set_error(err, err_len, e.what());
  } catch (...) {
    set_error(err, err_len, "unknown C++ exception");
  }
  return -1;
}

// The same check on a new thread that has never run Python, as autograd's
// threads allocate: both unwinders must give no frames.
__attribute__((visibility("default"))) int memsight_unwinder_check_thread(char* err, int err_len) {
  int rc = -1, frames = 0;
  std::thread t([&] { rc = memsight_unwinder_check(&frames, err, err_len); });
  t.join();
  if (rc == 0 && frames != 0) {
    set_error(err, err_len, std::to_string(frames) + " frames on a thread with no Python");
    return -1;
  }
  return rc;
}

// Counters: stacks gathered, distinct stacks resolved, stacks held, and
// whether code objects' deaths are watched (1) or each hit checks them (0).
__attribute__((visibility("default"))) void memsight_unwinder_counts(uint64_t* out) {
  Unwinder* u = unwinder();
  out[0] = u->gathered.load();
  out[1] = u->resolved.load();
  out[2] = u->stacks();
  out[3] = u->watched.load() ? 1 : 0;
}

}  // extern "C"
