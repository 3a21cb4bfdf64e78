// The first half of the classifier (classify.h): the phase each allocation
// of a device's trace was made in, and the runs and passes they form.
//
// Phases come, for each allocation, from the first source that says:
//   1. memsight's marks in the trace entry's user_metadata
//      ("memsight:fwd:encoder.layers.3", "memsight:bwd", ...; torch >= 2.10);
//   2. memsight's marks as external annotations (record_function names of the
//      same form, each a point in time; older torch), by time;
//   3. the stack (stack_phases.cpp); an empty stack on a trace that records
//      stacks is the autograd engine's thread (backward);
//   4. torch's own "Optimizer.step#..." annotations, by time.
#include <algorithm>
#include <unordered_map>

#include "analysis/kinds/classify.h"
#include "analysis/kinds/phase_timeline.h"
#include "analysis/kinds/stack_phases.h"
#include "model/device_dicts.h"

namespace memsight {
namespace {

// "memsight:fwd:encoder.layers.3" -> Forward, "encoder.layers.3";
// "memsight:bwd" -> Backward with no module. Anything else: Unknown.
struct Mark {
  Phase phase = Phase::Unknown;
  bool has_module = false;
  std::string_view module;
};
Mark parse_mark(std::string_view s) {
  constexpr std::string_view kPrefix = "memsight:";
  Mark m;
  if (!s.starts_with(kPrefix)) return m;
  s.remove_prefix(kPrefix.size());
  size_t colon = s.find(':');
  std::string_view phase = s.substr(0, colon);
  if (phase == "fwd")
    m.phase = Phase::Forward;
  else if (phase == "bwd")
    m.phase = Phase::Backward;
  else if (phase == "rec")
    m.phase = Phase::Recompute;
  else if (phase == "opt")
    m.phase = Phase::Optimizer;
  else if (phase == "none")
    m.phase = Phase::None;
  else
    return m;
  if (colon != std::string_view::npos) {
    m.has_module = true;
    m.module = s.substr(colon + 1);
  }
  return m;
}

int64_t int_of(const PyValue* v, int64_t otherwise) {
  return v && v->kind == PyValue::Kind::Int ? v->i : otherwise;
}
std::string_view str_of(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? std::string_view(v->s) : std::string_view();
}

std::pair<uint32_t, uint32_t> rows_of(const Snapshot& snap, size_t device) {
  return device < snap.device_count() ? snap.device_rows(device) : std::pair<uint32_t, uint32_t>{};
}

// Where each allocation's phase and module come from (see the top).
class PhaseFinder {
 public:
  PhaseFinder(const Snapshot& snap, size_t device, std::vector<std::string>& modules)
      : snap_(snap),
        modules_(modules),
        stacks_(snap, rows_of(snap, device).second - rows_of(snap, device).first) {
    auto [begin, end] = rows_of(snap, device);
    for (uint32_t r = begin; r < end && !frames_recorded_; ++r)
      frames_recorded_ = snap.trace.action[r] == Action::Alloc && snap.trace.stack[r] != 0;
    read_annotations(static_cast<int64_t>(device));
  }

  using Found = AllocPhases::Alloc;

  Found at(uint32_t row) {
    const TraceTable& t = snap_.trace;
    Found out;
    if (StrId m = t.user_metadata[row]) {
      auto it = meta_.find(m);
      if (it == meta_.end()) it = meta_.emplace(m, found_of(parse_mark(snap_.str(m)))).first;
      if (it->second.phase != Phase::Unknown && it->second.phase != Phase::None) {
        ++by_marks_;
        return it->second;
      }
    }
    if (!marks_.empty()) {
      auto it = std::upper_bound(marks_.begin(), marks_.end(), t.time_us[row],
                                 [](int64_t v, const TimedMark& m) { return v < m.time; });
      if (it != marks_.begin() && std::prev(it)->found.phase != Phase::None) {
        ++by_annotations_;
        return std::prev(it)->found;
      }
    }
    StackId s = t.stack[row];
    if (s) {
      const StackPhases::Found f = stacks_.of(s);
      out.phase = f.phase;
      out.accumulate = f.accumulate;
      out.hint = f.hint;
    } else if (frames_recorded_ && has_frames(t.shape[row])) {
      out.phase = Phase::Backward;  // a thread with no Python frames: the autograd engine's
    }
    if ((out.phase != Phase::None && out.phase != Phase::Unknown) || out.hint != KindHint::None) {
      ++by_stacks_;
      return out;
    }
    if (optimizer_steps_.empty()) return out;
    const int64_t time = t.time_us[row];
    auto it = std::upper_bound(optimizer_steps_.begin(), optimizer_steps_.end(), time,
                               [](int64_t v, const auto& step) { return v < step.first; });
    if (it != optimizer_steps_.begin() && std::prev(it)->second >= time) {
      ++by_optimizer_annotations_;
      out.phase = Phase::Optimizer;
    }
    return out;
  }

  std::string sources() const {
    std::string s;
    auto add = [&](int64_t n, const char* what) {
      if (!n) return;
      if (!s.empty()) s += ", ";
      s += what;
    };
    add(by_marks_, "memsight marks");
    add(by_annotations_, "memsight annotations");
    add(by_stacks_, "stacks");
    add(by_optimizer_annotations_, "optimizer annotations");
    return s.empty() ? "none" : s;
  }

 private:
  struct TimedMark {
    int64_t time;
    Found found;
  };

  // Whether entries of this shape have a "frames" key, asked once a shape.
  bool has_frames(ShapeId shape) {
    if (shape >= shape_frames_.size()) shape_frames_.resize(snap_.shapes.size(), -1);
    if (shape >= shape_frames_.size()) return shape_has(snap_, shape, Field::Frames);
    int8_t& f = shape_frames_[shape];
    if (f < 0) f = shape_has(snap_, shape, Field::Frames);
    return f;
  }

  uint32_t module_id(std::string_view name) {
    auto it = module_ids_.find(std::string(name));
    if (it != module_ids_.end()) return it->second;
    modules_.emplace_back(name);
    auto id = static_cast<uint32_t>(modules_.size());
    module_ids_.emplace(std::string(name), id);
    return id;
  }

  Found found_of(const Mark& m) {
    Found f;
    f.phase = m.phase;
    if (m.has_module) f.module = module_id(m.module);
    return f;
  }

  // memsight's marks (a START per mark: it is a point in time) and torch's
  // optimizer steps, of this device.
  void read_annotations(int64_t device) {
    std::vector<int64_t> open_steps;
    for (const PyValue* a : snap_.annotations().of(device)) {
      std::string_view name = str_of(a->get("name")), stage = str_of(a->get("stage"));
      int64_t time = int_of(a->get("time_us"), 0);
      if (name.starts_with("memsight:")) {
        Mark m = parse_mark(name);
        if (stage == "START" && m.phase != Phase::Unknown) marks_.push_back({time, found_of(m)});
      } else if (name.starts_with("Optimizer.step#")) {
        if (stage == "START")
          open_steps.push_back(time);
        else if (stage == "END" && !open_steps.empty()) {
          optimizer_steps_.emplace_back(open_steps.back(), time);
          open_steps.pop_back();
        }
      }
    }
    std::stable_sort(marks_.begin(), marks_.end(),
                     [](const TimedMark& a, const TimedMark& b) { return a.time < b.time; });
    // By start, each step's end raised to the latest end up to it: whether
    // any step holds a time is one lookup (a scan of every step for every
    // allocation cost their product).
    std::sort(optimizer_steps_.begin(), optimizer_steps_.end());
    for (size_t i = 1; i < optimizer_steps_.size(); ++i)
      optimizer_steps_[i].second =
          std::max(optimizer_steps_[i].second, optimizer_steps_[i - 1].second);
  }

  const Snapshot& snap_;
  std::vector<std::string>& modules_;
  bool frames_recorded_ = false;
  StackPhases stacks_;
  std::vector<int8_t> shape_frames_;  // per shape: has_frames(); -1: not yet
  std::unordered_map<StrId, Found> meta_;
  std::unordered_map<std::string, uint32_t> module_ids_;
  std::vector<TimedMark> marks_;
  std::vector<std::pair<int64_t, int64_t>> optimizer_steps_;
  int64_t by_marks_ = 0, by_annotations_ = 0, by_stacks_ = 0, by_optimizer_annotations_ = 0;
};

}  // namespace

std::string_view phase_name(Phase p) {
  static constexpr std::string_view kNames[] = {"",
                                                "outside forward, backward and optimizer step",
                                                "moving the model",
                                                "forward",
                                                "backward",
                                                "recomputed forward",
                                                "optimizer step"};
  return kNames[static_cast<size_t>(p)];
}

AllocPhases find_phases(const Snapshot& snap, size_t device) {
  AllocPhases ph;
  auto [begin, end] =
      device < snap.device_count() ? snap.device_rows(device) : std::pair<uint32_t, uint32_t>{};
  PhaseFinder finder(snap, device, ph.modules);
  auto timeline = std::make_shared<PhaseTimeline>();
  PhaseTimeline& tl = *timeline;
  Phase last = Phase::Unknown;
  const Action* action = snap.trace.action.data();
  // Sized once: growing them would page in twice their memory.
  const auto allocs = static_cast<size_t>(std::count(action + begin, action + end, Action::Alloc));
  ph.allocs.reserve(allocs);
  tl.run_of.reserve(allocs);
  for (uint32_t r = begin; r < end; ++r) {
    if (action[r] != Action::Alloc) continue;
    const AllocPhases::Alloc found = finder.at(r);
    ph.allocs.push_back(found);
    int32_t run = -1;
    if (known_phase(found.phase)) {
      ++ph.sources.phase_allocs;
      tl.add(found.phase, static_cast<int32_t>(r - begin), last);
      run = static_cast<int32_t>(tl.runs.size() - 1);
    }
    tl.run_of.push_back(run);
  }
  tl.finish();
  ph.sources.allocs = static_cast<int64_t>(ph.allocs.size());
  ph.sources.phases = finder.sources();
  ph.timeline = std::move(timeline);
  return ph;
}

}  // namespace memsight
