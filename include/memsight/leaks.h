#pragma once
// Memory that grows from iteration to iteration of a training (or any) loop:
// the loop's iterations found in the trace, and the allocation sites that
// leave memory behind in every part of the run. A leak is memory an
// iteration allocates and nothing frees later: a list of losses kept with
// their graphs, a cache that never empties. A cache that fills up and then
// stays the same size is not one, nor is memory one step keeps until the
// next. See docs/leaks.md.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memsight/categories.h"
#include "memsight/frames.h"
#include "memsight/snapshot.h"

namespace memsight {

// Where the iterations of a device's trace begin. Iteration i runs from
// trace entry starts[i] up to starts[i+1]; the last one to the end of the
// trace (and is not complete).
struct Iterations {
  // How they were found: "memsight steps" (memsight.torch.mark_step()),
  // "profiler steps" (torch.profiler's ProfilerStep#N), "optimizer steps"
  // (torch's Optimizer.step annotations), "repeating allocations" (the
  // allocation that recurs once per iteration), or "none".
  std::string source;
  std::vector<int64_t> starts;   // trace entry indices within the device's trace, ascending
  std::vector<int64_t> numbers;  // each iteration's step number (its index where none is recorded)
  // "repeating allocations": the stack that recurs, and every how many
  // allocations on average.
  StackId marker = 0;
  double period = 0;
  size_t complete() const { return starts.empty() ? 0 : starts.size() - 1; }
  bool operator==(const Iterations&) const = default;
};

// The iterations of `device`'s trace (docs/leaks.md, "Iterations").
Iterations find_iterations(const Snapshot& snap, size_t device);

// One surviving allocation: made in an iteration, still live at the end.
struct Survivor {
  int64_t event = 0;  // trace entry of its allocation
  int64_t iteration = 0;
  int64_t bytes = 0, requested = 0;
  StackId stack = 0;
  bool operator==(const Survivor&) const = default;
};

// Who holds a site's survivors, where the snapshot names them
// (memsight_holders; analysis/leaks/leak_holders.cpp).
struct HeldBy {
  std::string path, type, module, file;  // the holder (memsight/holders.h); "" none
  int64_t line = 0;
  int64_t votes = 0, checked = 0;  // newest survivors it holds, of those checked
  bool through_graph = false;      // held through autograd graphs of what it holds
  bool operator==(const HeldBy&) const = default;
};

struct LeakSite {
  std::string site;  // the frame rule's site label
  FrameKind kind = FrameKind::Internal;
  StackId stack = 0;  // of its newest survivor
  int64_t bytes_per_iteration = 0;
  int64_t iterations_grown = 0;  // measured iterations that left memory behind
  int64_t surviving_bytes = 0;   // allocated in the measured iterations, live at the end
  int64_t surviving_count = 0;
  Category category = Category::Unknown;  // of most of the surviving bytes
  std::string module;                     // of most of them ("" none; "(model)" the model)
  std::string made_in;                    // their phase: "forward", "backward", ... ("" unknown)
  std::vector<Survivor> newest;           // the newest survivors, newest first (at most 5)
  HeldBy held_by;                         // who holds them ("" path: not named)
  bool operator==(const LeakSite&) const = default;
};

// Live bytes at the start of each iteration (starts[0..]): a site's, or all.
struct GrowthSeries {
  std::string site;  // "" for all allocated memory
  bool leak = false;
  std::vector<int64_t> live;
  bool operator==(const GrowthSeries&) const = default;
};

// What find_leaks concludes of a device.
enum class LeakVerdict : uint8_t {
  Leak,              // sites keep memory in every part of the run
  None,              // a loop that does not grow
  TooFewIterations,  // fewer than kMinLeakIterations complete ones
  NoIterations,      // no loop found
  NoTrace,           // no allocation history
};
// "leak", "none", "too few iterations", "no iterations", "no trace".
std::string_view leak_verdict_name(LeakVerdict v);

struct LeakReport {
  int device = 0;
  size_t entries = 0;
  Iterations iterations;
  LeakVerdict verdict = LeakVerdict::NoTrace;
  std::string message;  // the verdict in a sentence
  // Iterations whose allocations are checked for survivors: every complete
  // one but the last (its memory may be kept for the next, legitimately).
  int64_t measured = 0;
  int64_t bytes_per_iteration = 0;  // of the leaking sites together
  std::vector<LeakSite> sites;      // leaking, most bytes per iteration first
  // Where the newest surviving allocation of most iterations was made: the
  // tensor that likely keeps the rest alive when they are a graph. The
  // snapshot says where memory was allocated, not who keeps it
  // (docs/leaks.md, "Allocated at, and what keeps it").
  std::string alloc_site;
  StackId alloc_stack = 0;
  // What to look for, from how the blocks were made (leak_advice.h).
  std::string advice;
  std::vector<GrowthSeries> growth;  // all memory first, then the leaking and largest sites
  bool operator==(const LeakReport&) const = default;
};

struct Leaks {
  // One report per group of alike devices (those with a trace or segments
  // whose reports are the same but for the device number), in the order of
  // each group's first device, which LeakReport::device names.
  std::vector<LeakReport> devices;
  // The devices of each group: ranges [first, last], ascending.
  std::vector<std::vector<std::pair<int, int>>> members;
  std::vector<std::string> user_code;  // the --user-code patterns in force
};

Leaks find_leaks(const Snapshot& snap, const UserCode& user_code = {});
// Groups of alike devices are reported once, named by their devices: in
// the text "Devices 0-7 (8 alike)", in the JSON "alike":[[0,7]] (the
// summary's page form).
std::string leaks_text(const Snapshot& snap, const Leaks& leaks);
std::string leaks_json(const Snapshot& snap, const Leaks& leaks);
// The least number of complete iterations find_leaks judges.
inline constexpr size_t kMinLeakIterations = 5;

}  // namespace memsight
