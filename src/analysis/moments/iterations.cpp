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
// trace entry at or after it.
#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

#include "memsight/leaks.h"
#include "model/device_dicts.h"

namespace memsight {
namespace {

constexpr std::string_view kMemsightStep = "memsight:step:";
constexpr std::string_view kProfilerStep = "ProfilerStep#";
constexpr std::string_view kOptimizerStep = "Optimizer.step#";

int64_t int_or(const PyValue* v, int64_t otherwise) {
  return v && v->kind == PyValue::Kind::Int ? v->i : otherwise;
}
std::string_view str_or_empty(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? std::string_view(v->s) : std::string_view();
}

// The number after a prefix ("ProfilerStep#12" -> 12); -1 when none.
int64_t number_after(std::string_view name, std::string_view prefix) {
  std::string_view n = name.substr(prefix.size());
  int64_t v = -1;
  auto r = std::from_chars(n.data(), n.data() + n.size(), v);
  return r.ec == std::errc() && r.ptr == n.data() + n.size() && v >= 0 ? v : -1;
}

struct Mark {
  int64_t time, number;
};

// The START annotations of this device named with `prefix`, by time.
std::vector<Mark> annotation_marks(const Snapshot& snap, int64_t device, std::string_view prefix) {
  std::vector<Mark> out;
  for (const PyValue* a : snap.annotations().of(device)) {
    std::string_view name = str_or_empty(a->get("name"));
    if (!name.starts_with(prefix) || str_or_empty(a->get("stage")) != "START") continue;
    out.push_back({int_or(a->get("time_us"), 0), number_after(name, prefix)});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Mark& a, const Mark& b) { return a.time < b.time; });
  return out;
}

// Iterations from marks: each begins with the first entry at or after its
// mark; marks with no entry before the next are one iteration (the first
// one's number).
Iterations from_marks(const Snapshot& snap, size_t device, const std::vector<Mark>& marks) {
  Iterations it;
  auto [begin, end] = snap.device_rows(device);
  const int64_t* times = snap.trace.time_us.data();
  int64_t index = 0;
  for (const Mark& m : marks) {
    const int64_t* at = std::lower_bound(times + begin, times + end, m.time);
    auto ev = static_cast<int64_t>(at - (times + begin));
    if (ev < static_cast<int64_t>(end - begin) && (it.starts.empty() || ev > it.starts.back())) {
      it.starts.push_back(ev);
      it.numbers.push_back(m.number >= 0 ? m.number : index);
    }
    ++index;
  }
  return it;
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

Iterations find_iterations(const Snapshot& snap, size_t device) {
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
  for (const Source& s : kSources) {
    Iterations it = from_marks(snap, device, annotation_marks(snap, dev, s.prefix));
    if (it.starts.size() >= 2) {
      it.source = s.name;
      return it;
    }
  }
  Iterations it = from_pattern(snap, device);
  it.source = it.starts.size() >= 2 ? "repeating allocations" : "none";
  return it;
}

}  // namespace memsight
