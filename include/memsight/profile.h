#pragma once
// torch.profiler outputs: the Chrome trace (`export_chrome_trace`, what
// tensorboard and Perfetto open) read as a stream into compact columns, a
// per-step memory and time report over it, and the categorised memory
// timeline (`export_memory_timeline`) as an interactive page.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/frames.h"
#include "memsight/input_limits.h"
#include "memsight/snapshot.h"

namespace memsight {

// What memsight keeps of a trace: a few numbers per event, names interned
// (and cut at kNameLimit). Events with a number out of range are dropped
// and counted in `notes` (memsight/input_limits.h).
struct ProfileTrace {
  StringTable names;
  struct Span {  // cpu_op, user_annotation (ProfilerStep#N among them)
    int64_t tid;
    double ts, dur;  // microseconds
    StrId name;
  };
  struct PyCall {  // python_function
    int64_t tid;
    double ts, dur;
    StrId name;          // "path/file.py(LINE): function"
    int64_t id, parent;  // "Python id" / "Python parent id" (-1: none)
  };
  struct Mem {  // "[memory]" instant events
    int64_t tid;
    double ts;
    int64_t bytes;  // + allocation, - free
    int64_t addr;
    int64_t total_allocated, total_reserved;  // the device's allocator after it
    int device;                               // CUDA device, or -1 for the CPU
  };
  struct Kernel {  // kernel, gpu_memcpy, gpu_memset
    double ts, dur;
    StrId name;
    int64_t correlation;
    int device;
  };
  std::vector<Span> ops, annotations;
  std::vector<PyCall> pycalls;
  std::vector<Mem> mems;
  std::vector<Kernel> kernels;
  std::vector<std::pair<int64_t, double>> launches;  // correlation -> cuda_runtime/driver ts
  std::vector<std::string> device_names;             // deviceProperties, by id
  int64_t events = 0;
  int rank = -1;  // distributedInfo.rank, when present
  bool with_stack = false, profile_memory = false, record_shapes = false;
  InputNotes notes;  // what was dropped, by reason
};

// Reads a Chrome trace from a file ("-": standard input; gzip/zstd/xz by
// content). Throws Error, with the byte offset, on malformed JSON or a JSON
// file that is not a torch.profiler trace.
ProfileTrace read_profile_trace(const std::string& path);

// The report, per profiler step (one "step" for the whole trace when it has
// no ProfilerStep#N annotations).
struct OpBytes {
  std::string op;     // "aten::mm"
  std::string site;   // where Python called it, by the frame rule ("" if the thread has no Python)
  std::string stack;  // user-first stack text
  int64_t bytes = 0, count = 0;
};
struct NameTime {
  std::string name;
  double total_us = 0;
  int64_t count = 0;
};
struct StepDevice {
  int device = 0;
  int64_t peak_allocated = 0, peak_reserved = 0;
  double peak_ts = 0;  // when allocated peaked (µs, trace clock)
  int64_t allocs = 0, alloc_bytes = 0, frees = 0, free_bytes = 0;
  std::vector<OpBytes> live_at_peak;    // by allocating op, largest first
  std::vector<OpBytes> allocated_most;  // bytes allocated during the step, by op
};
struct ProfileStep {
  int64_t step = -1;  // N of ProfilerStep#N; -1: the whole trace
  // A ProfilerStep#N the trace holds more than once (two profiler sessions
  // in one file, say) stays one step per span, each labelled with which
  // occurrence it is, in time order: "occurrence 2 of 3".
  int64_t occurrence = 1, occurrences = 1;
  double ts = 0, dur = 0;
  std::vector<StepDevice> devices;
  std::vector<NameTime> top_ops, top_kernels;
};
struct ProfileReport {
  std::vector<ProfileStep> steps;
  InputNotes notes;  // what the reader dropped, and what the analysis left out
  std::vector<std::string> device_names;
  int64_t events = 0;
  bool has_memory = false, has_stacks = false;
  // Memory over time per device, at most ~4000 points each (the maximum of
  // each bucket, so peaks survive): times (µs), allocated, reserved.
  struct Curve {
    int device;
    std::vector<double> ts;
    std::vector<int64_t> allocated, reserved;
  };
  std::vector<Curve> curves;
  double t0 = 0;
};

ProfileReport analyze_profile(const ProfileTrace& trace, const UserCode& user_code = {});
std::string profile_text(const ProfileReport& r);
std::string profile_json(const ProfileReport& r);
std::string profile_html(const ProfileReport& r, const std::string& title);

// torch's categorised memory timeline: export_memory_timeline's ".json" /
// ".json.gz" ([times_us, sizes[9]]) or ".raw.json.gz" ([[t_ns, action,
// bytes, category], ...]) output.
struct MemoryTimeline {
  std::vector<double> ts;                   // µs, ascending
  std::vector<std::vector<int64_t>> bytes;  // per category (kTimelineCategories order)
  std::string device;                       // "cuda:0" when known
  InputNotes notes;                         // records dropped or reordered, by reason
};
extern const char* const kTimelineCategories[8];  // parameter ... unknown
MemoryTimeline read_memory_timeline(const std::string& path);
MemoryTimeline read_memory_timeline_bytes(std::string_view data);  // plain or compressed
std::string timeline_html(const MemoryTimeline& t, const std::string& title);

}  // namespace memsight
