// Where a loop's iterations begin in a device's trace (memsight/leaks.h).
// The first of these that marks at least two iterations is used:
//   1. memsight.torch.mark_step(): record_function annotations
//      "memsight:step:N" (a START per step), recorded with the history;
//   2. torch.profiler's step annotations "ProfilerStep#N";
//   3. torch's own "Optimizer.step#..." annotations (one per optimizer step);
//   4. the repeating pattern of allocations: an allocation stack that recurs
//      at a steady interval (each gap at most 1.5 times the shortest), chosen
//      among such stacks by the count most of them share (most of a training
//      step's allocation lines run once per step), then by the earliest first
//      occurrence (the start of the step).
// An annotation is a point in time; its iteration begins with the first
// trace entry at or after it. A device with fewer than two marks of its own
// of a kind takes the process's (process_marks.h): torch records each on
// the device current when it runs, one device of a process driving several.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis/moments/process_marks.h"
#include "memsight/leaks.h"
#include "model/device_dicts.h"

namespace memsight {
namespace {

constexpr std::string_view kMemsightStep = "memsight:step:";
constexpr std::string_view kProfilerStep = "ProfilerStep#";
constexpr std::string_view kOptimizerStep = "Optimizer.step#";

// Iterations from marks (by time): each begins with the first entry at or
// after its mark; marks with no entry before the next are one iteration (the
// first one's number, else its index). Each step jumps past the marks up to
// the entry found, so a device costs its iterations, not every mark.
Iterations from_marks(const Snapshot& snap, size_t device, const std::vector<StepMark>& marks) {
  Iterations it;
  auto [begin, end] = snap.device_rows(device);
  const int64_t* first = snap.trace.time_us.data() + begin;
  const int64_t* last = snap.trace.time_us.data() + end;
  for (auto m = marks.begin(); m != marks.end();) {
    const int64_t* at = std::lower_bound(first, last, m->time);
    if (at == last) break;
    it.starts.push_back(at - first);
    it.numbers.push_back(m->number >= 0 ? m->number : m - marks.begin());
    m = std::upper_bound(m, marks.end(), *at,
                         [](int64_t t, const StepMark& x) { return t < x.time; });
  }
  return it;
}

// The process's optimizer steps that touched `device`: a trace entry of its
// falls between the step's START and END (ends raised as ProcessMarks has
// them). Only the steps within the device's time span are looked at.
std::vector<StepMark> steps_touching(const Snapshot& snap, size_t device,
                                     const std::vector<StepMark>& steps) {
  std::vector<StepMark> out;
  auto [begin, end] = snap.device_rows(device);
  if (begin == end) return out;
  const int64_t* first = snap.trace.time_us.data() + begin;
  const int64_t* last = snap.trace.time_us.data() + end;
  auto from = std::partition_point(steps.begin(), steps.end(),
                                   [&](const StepMark& m) { return m.end < *first; });
  for (auto m = from; m != steps.end() && m->time <= last[-1]; ++m) {
    const int64_t* at = std::lower_bound(first, last, m->time);
    if (at != last && *at <= m->end) out.push_back(*m);
  }
  return out;
}

// The allocation stack that recurs once per iteration (see the top).
Iterations from_pattern(const Snapshot& snap, size_t device) {
  Iterations it;
  auto [begin, end] = snap.device_rows(device);
  const TraceTable& t = snap.trace;
  const size_t n = snap.frames.stack_count();
  constexpr uint32_t kNone = UINT32_MAX;
  struct Seen {
    StackId stack = 0;
    uint32_t count = 0, first = kNone, last = 0, min_gap = kNone, max_gap = 0;
  };
  // The stacks this device allocates from, in order of their first use.
  // Each stack's slot in `seen` is looked up in a vector over the
  // snapshot's stacks when there are no more of them than the device has
  // entries, else in a map: a vector on every device cost devices times
  // stacks.
  std::vector<Seen> seen;
  const bool dense = n <= end - begin;
  std::vector<uint32_t> dense_slot(dense ? n : 0, kNone);
  std::unordered_map<StackId, uint32_t> sparse_slot;
  uint32_t k = 0;  // allocation index
  for (uint32_t r = begin; r < end; ++r) {
    if (t.action[r] != Action::Alloc) continue;
    StackId s = t.stack[r];
    if (s != 0 && s < n) {
      uint32_t& slot = dense ? dense_slot[s] : sparse_slot.try_emplace(s, kNone).first->second;
      if (slot == kNone) {
        slot = static_cast<uint32_t>(seen.size());
        seen.push_back({s});
      }
      Seen& e = seen[slot];
      if (e.count == 0) {
        e.first = k;
      } else {
        e.min_gap = std::min(e.min_gap, k - e.last);
        e.max_gap = std::max(e.max_gap, k - e.last);
      }
      e.last = k;
      ++e.count;
    }
    ++k;
  }
  std::map<uint32_t, uint32_t> by_count;  // count -> regular stacks with it
  auto regular = [&](const Seen& e) {
    return e.count >= kMinLeakIterations + 1 && e.min_gap >= 2 &&
           static_cast<uint64_t>(e.max_gap) * 2 <= static_cast<uint64_t>(e.min_gap) * 3;
  };
  for (const Seen& e : seen)
    if (regular(e)) ++by_count[e.count];
  if (by_count.empty()) return it;
  uint32_t count = 0, most = 0;
  for (auto [c, stacks] : by_count)
    if (stacks >= most) {
      count = c;
      most = stacks;
    }
  // The earliest first use among them: the first in `seen`.
  const Seen& m = *std::find_if(seen.begin(), seen.end(),
                                [&](const Seen& e) { return e.count == count && regular(e); });
  const StackId marker = m.stack;
  for (uint32_t r = begin; r < end; ++r)
    if (t.action[r] == Action::Alloc && t.stack[r] == marker) {
      it.starts.push_back(r - begin);
      it.numbers.push_back(static_cast<int64_t>(it.numbers.size()));
    }
  it.marker = marker;
  it.period = m.count > 1 ? (m.last - m.first) / static_cast<double>(m.count - 1) : 0;
  return it;
}

}  // namespace

Iterations find_iterations(const Snapshot& snap, size_t device, ProcessMarks& process) {
  Iterations none;
  none.source = "none";
  if (device >= snap.device_count()) return none;
  auto dev = static_cast<int64_t>(device);
  struct Source {
    std::string_view prefix, name;
  };
  static constexpr Source kSources[] = {
      {kMemsightStep, "memsight steps"},
      {kProfilerStep, "profiler steps"},
      {kOptimizerStep, "optimizer steps"},
  };
  for (size_t k = 0; k < std::size(kSources); ++k) {
    const Source& s = kSources[k];
    Iterations it = from_marks(snap, device, device_marks(snap, dev, s.prefix));
    // None of its own: the process's (process_marks.h).
    if (it.starts.size() < 2) {
      const std::vector<StepMark>& all = process.of(k, s.prefix);
      it = from_marks(snap, device,
                      s.prefix == kOptimizerStep ? steps_touching(snap, device, all) : all);
    }
    if (it.starts.size() >= 2) {
      it.source = s.name;
      return it;
    }
  }
  Iterations it = from_pattern(snap, device);
  it.source = it.starts.size() >= 2 ? "repeating allocations" : "none";
  return it;
}

Iterations find_iterations(const Snapshot& snap, size_t device) {
  ProcessMarks process(snap);
  return find_iterations(snap, device, process);
}

}  // namespace memsight
