// The classifier (classify.h): the phase each allocation was made in, then
// its category from the phase and from when it was freed, and the tags of
// memsight.torch over the blocks live at the snapshot.
//
// Phases come, for each allocation, from the first source that says:
//   1. memsight's marks in the trace entry's user_metadata
//      ("memsight:fwd:encoder.layers.3", "memsight:bwd", ...; torch >= 2.10);
//   2. memsight's marks as external annotations (record_function names of the
//      same form, each a point in time; older torch), by time;
//   3. the stack: a forward re-run by activation checkpointing anywhere in it,
//      else the innermost of Module.__call__ (forward), a function named
//      `backward` or the autograd engine (backward), torch/optim (optimizer
//      step), Module._apply (moving a model); an empty stack on a trace that
//      records stacks is the autograd engine's thread (backward);
//   4. torch's own "Optimizer.step#..." annotations, by time.
//
// The trace is then cut into runs (consecutive allocations of one phase;
// allocations of no phase do not cut) and passes (runs of one group:
// backward and recompute are one). A block's category follows from the run
// and pass it was made in and the event that freed it (docs/summary.md).
#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "analysis/kinds/classify.h"

namespace memsight {
namespace {

constexpr int32_t kOpen = replay::Lifetime::kNever;

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// What the phase rules look for in a frame's file and function names, found
// once per string: a stack's frames share their strings, and a name can be
// long enough that searching it again for every stack would cost more than
// reading the snapshot.
enum FileBit : uint8_t { kPython = 1, kOptim = 2, kModulePy = 4, kCheckpoint = 8 };
enum NameBit : uint8_t {
  kBackward = 1,      // exactly "backward"
  kRecomputeish = 2,  // "recompute" or "unpack" in it
  kAccumulate = 4,    // AccumulateGrad
  kAutograd = 8,      // the autograd engine or a generated backward
  kCallImpl = 16,     // Module._call_impl or _wrapped_call_impl
  kApply = 32,        // Module._apply
};

uint8_t file_bits_of(std::string_view f) {
  uint8_t b = 0;
  if (f.ends_with(".py") || f.starts_with("<")) b |= kPython;
  if (has(f, "torch/optim/")) b |= kOptim;
  if (has(f, "torch/nn/modules/module.py")) b |= kModulePy;
  if (has(f, "torch/utils/checkpoint.py")) b |= kCheckpoint;
  return b;
}

uint8_t name_bits_of(std::string_view n) {
  uint8_t b = 0;
  if (n == "backward") b |= kBackward;
  if (has(n, "recompute") || has(n, "unpack")) b |= kRecomputeish;
  if (has(n, "AccumulateGrad")) b |= kAccumulate;
  if (has(n, "torch::autograd::Engine") || has(n, "torch::autograd::generated::")) b |= kAutograd;
  if (n == "_call_impl" || n == "_wrapped_call_impl") b |= kCallImpl;
  if (n == "_apply") b |= kApply;
  return b;
}

Phase frame_phase(uint8_t name, uint8_t file) {
  if (file & kPython) {
    if (name & kBackward) return Phase::Backward;
    if (file & kOptim) return Phase::Optimizer;
    if (file & kModulePy) {
      if (name & kCallImpl) return Phase::Forward;
      if (name & kApply) return Phase::Init;
    }
    return Phase::None;
  }
  if (name & (kAutograd | kAccumulate)) return Phase::Backward;
  return Phase::None;
}

// Each string's bits (bit 7: found), made on first use.
class StringBits {
 public:
  explicit StringBits(const Snapshot& snap) : snap_(snap), bits_(snap.strings.size(), 0) {}
  uint8_t file(StrId s) { return get(s, file_bits_of); }
  uint8_t name(StrId s) { return get(s, name_bits_of); }

 private:
  uint8_t get(StrId s, uint8_t (*of)(std::string_view)) {
    if (s >= bits_.size()) return of(snap_.str(s));
    if (!(bits_[s] & 0x80)) bits_[s] = static_cast<uint8_t>(0x80 | of(snap_.str(s)));
    return bits_[s] & 0x7f;
  }
  const Snapshot& snap_;
  std::vector<uint8_t> bits_;
};

// Phase of a stack (innermost frame first), and whether it accumulates a
// gradient (AccumulateGrad, with C++ stacks).
std::pair<Phase, bool> stack_phase(const Snapshot& snap, StringBits& files, StringBits& names,
                                   StackId s) {
  auto frames = snap.frames.stack(s);
  if (frames.empty()) return {Phase::Unknown, false};
  Phase inner = Phase::None;
  bool accumulate = false;
  for (FrameId id : frames) {
    const Frame& f = snap.frames.frame(id);
    uint8_t name = names.name(f.name), file = files.file(f.filename);
    if ((file & kCheckpoint) && (name & (kRecomputeish | kBackward)))
      return {Phase::Recompute, false};
    accumulate = accumulate || (name & kAccumulate);
    if (inner == Phase::None) inner = frame_phase(name, file);
  }
  return {inner, accumulate};
}

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

// Where each allocation's phase and module come from (see the top).
class PhaseFinder {
 public:
  PhaseFinder(const Snapshot& snap, size_t device, std::vector<std::string>& modules)
      : snap_(snap),
        modules_(modules),
        stacks_(snap.frames.stack_count(), 0xff),
        file_bits_(snap),
        name_bits_(snap) {
    auto [begin, end] =
        device < snap.device_count() ? snap.device_rows(device) : std::pair<uint32_t, uint32_t>{};
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
      uint8_t& c = stacks_[s];
      if (c == 0xff) {
        auto [p, acc] = stack_phase(snap_, file_bits_, name_bits_, s);
        c = static_cast<uint8_t>(static_cast<uint8_t>(p) | (acc ? 0x80 : 0));
      }
      out.phase = static_cast<Phase>(c & 0x7f);
      out.accumulate = c & 0x80;
    } else if (frames_recorded_ && has_frames(t.shape[row])) {
      out.phase = Phase::Backward;  // a thread with no Python frames: the autograd engine's
    }
    if (out.phase != Phase::None && out.phase != Phase::Unknown) {
      ++by_stacks_;
      return out;
    }
    const int64_t time = optimizer_steps_.empty() ? 0 : t.time_us[row];
    for (auto [from, to] : optimizer_steps_)
      if (time >= from && time <= to) {
        ++by_optimizer_annotations_;
        out.phase = Phase::Optimizer;
        return out;
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
    const PyValue* ann = snap_.top("external_annotations");
    if (!ann || ann->kind != PyValue::Kind::List) return;
    std::vector<int64_t> open_steps;
    for (const PyValue& a : ann->items) {
      if (a.kind != PyValue::Kind::Dict) continue;
      if (int_of(a.get("device"), device) != device) continue;
      std::string_view name = str_of(a.get("name")), stage = str_of(a.get("stage"));
      int64_t time = int_of(a.get("time_us"), 0);
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
  }

  const Snapshot& snap_;
  std::vector<std::string>& modules_;
  bool frames_recorded_ = false;
  std::vector<uint8_t> stacks_;       // per stack: phase | 0x80 for AccumulateGrad; 0xff: not yet
  std::vector<int8_t> shape_frames_;  // per shape: has_frames(); -1: not yet
  StringBits file_bits_, name_bits_;
  std::unordered_map<StrId, Found> meta_;
  std::unordered_map<std::string, uint32_t> module_ids_;
  std::vector<TimedMark> marks_;
  std::vector<std::pair<int64_t, int64_t>> optimizer_steps_;
  int64_t by_marks_ = 0, by_annotations_ = 0, by_stacks_ = 0, by_optimizer_annotations_ = 0;
};

enum class Group : uint8_t { Init, Forward, Backward, Optimizer };
Group group_of(Phase p) {
  switch (p) {
    case Phase::Init:
      return Group::Init;
    case Phase::Forward:
      return Group::Forward;
    case Phase::Optimizer:
      return Group::Optimizer;
    default:
      return Group::Backward;  // Backward, Recompute
  }
}
bool known(Phase p) { return p != Phase::Unknown && p != Phase::None; }

// Consecutive allocations of one phase (runs) and of one group (passes).
// Each ends where the next begins; the last ones are open.
struct Timeline {
  struct Run {
    int32_t start, end;
    uint32_t pass;
  };
  struct Pass {
    Group group;
    int32_t start, end;
  };
  std::vector<Run> runs;
  std::vector<Pass> passes;
  std::vector<int32_t> first_backward, first_forward;  // from pass i on; -1: none

  void add(Phase p, int32_t event, Phase& last) {
    if (!runs.empty() && p == last) return;
    Group g = group_of(p);
    if (passes.empty() || passes.back().group != g) {
      if (!passes.empty()) passes.back().end = event;
      passes.push_back({g, event, kOpen});
    }
    if (!runs.empty()) runs.back().end = event;
    runs.push_back({event, kOpen, static_cast<uint32_t>(passes.size() - 1)});
    last = p;
  }

  void finish() {
    first_backward.assign(passes.size() + 1, -1);
    first_forward.assign(passes.size() + 1, -1);
    for (size_t i = passes.size(); i-- > 0;) {
      first_backward[i] =
          passes[i].group == Group::Backward ? static_cast<int32_t>(i) : first_backward[i + 1];
      first_forward[i] =
          passes[i].group == Group::Forward ? static_cast<int32_t>(i) : first_forward[i + 1];
    }
  }

  // The end of the first backward pass after pass p (kOpen: none).
  int32_t next_backward_end(size_t p) const {
    int32_t b = first_backward[std::min(p + 1, passes.size())];
    return b >= 0 ? passes[static_cast<size_t>(b)].end : kOpen;
  }

  // Until when a block made before pass `from` (or in the forward pass
  // from-1) is still an activation: the end of the first forward after the
  // next backward (the next training step's forward, when the references
  // that held it are rebound), else of the next forward.
  int32_t activation_horizon(size_t from) const {
    int32_t b = first_backward[std::min(from, passes.size())];
    int32_t f = b >= 0 ? first_forward[static_cast<size_t>(b) + 1]
                       : first_forward[std::min(from, passes.size())];
    return f >= 0 ? passes[static_cast<size_t>(f)].end : kOpen;
  }
};

bool freed_before(int32_t free_requested, int32_t end) {
  return free_requested != kOpen && free_requested < end;
}
bool until(int32_t free_requested, int32_t horizon) {
  return horizon == kOpen || free_requested < horizon;
}

// Tag priority when several storages share a block: what a person would
// call it first.
int priority(Category c) {
  switch (c) {
    case Category::Parameter:
      return 0;
    case Category::Buffer:
      return 1;
    case Category::Gradient:
      return 2;
    default:
      return 3;
  }
}

Category parse_category(std::string_view s) {
  if (s == "parameter") return Category::Parameter;
  if (s == "gradient") return Category::Gradient;
  if (s == "optimizer_state" || s == "optimizer state") return Category::OptimizerState;
  if (s == "buffer") return Category::Buffer;
  return Category::Unknown;
}

// Tags over the blocks live at the end of the replay (those of the snapshot).
void apply_tags(const std::vector<StorageTag>& tags, int64_t device, const replay::Result& rr,
                BlockCategories& bc) {
  if (std::none_of(tags.begin(), tags.end(),
                   [&](const StorageTag& t) { return t.device == device; }))
    return;
  std::unordered_map<std::string, uint32_t> module_ids;
  for (uint32_t m = 0; m < bc.modules.size(); ++m) module_ids.emplace(bc.modules[m], m + 1);
  std::vector<std::pair<int64_t, uint32_t>> live;  // (address, block)
  for (uint32_t i = 0; i < rr.blocks.size(); ++i)
    if (rr.blocks[i].free_requested == replay::Lifetime::kNever)
      live.emplace_back(rr.blocks[i].address, i);
  std::sort(live.begin(), live.end());
  std::vector<int> best(rr.blocks.size(), 99);
  for (const StorageTag& tag : tags) {
    if (tag.device != device) continue;
    ++bc.sources.tags;
    auto it = std::upper_bound(live.begin(), live.end(), std::make_pair(tag.address, UINT32_MAX));
    if (it == live.begin()) continue;
    const replay::Lifetime& l = rr.blocks[std::prev(it)->second];
    // tag.address >= l.address; unsigned: a file's addresses can be anything
    if (static_cast<uint64_t>(tag.address) - static_cast<uint64_t>(l.address) >=
        static_cast<uint64_t>(l.size))
      continue;
    ++bc.sources.tags_matched;
    uint32_t b = std::prev(it)->second;
    if (priority(tag.category) >= best[b]) continue;
    best[b] = priority(tag.category);
    BlockClass& c = bc.blocks[b];
    c.category = tag.category;
    c.tagged = true;
    auto [m, fresh] = module_ids.emplace(tag.module, static_cast<uint32_t>(bc.modules.size() + 1));
    if (fresh) bc.modules.push_back(tag.module);
    c.module = m->second;
  }
}

}  // namespace

struct PhaseTimeline {
  Timeline tl;
  std::vector<int32_t> run_of;  // per alloc entry: its run; -1: no known phase
};

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

std::vector<StorageTag> read_tags(const Snapshot& snap) {
  std::vector<StorageTag> out;
  const PyValue* t = snap.top("memsight_tags");
  const PyValue* st = t ? t->get("storages") : nullptr;
  if (!st || st->kind != PyValue::Kind::List) return out;
  for (const PyValue& e : st->items) {
    if (e.kind != PyValue::Kind::Dict) continue;
    StorageTag tag;
    const PyValue *dev = e.get("device"), *addr = e.get("addr"), *size = e.get("size");
    if (!dev || !addr || !size || dev->kind != PyValue::Kind::Int ||
        addr->kind != PyValue::Kind::Int || size->kind != PyValue::Kind::Int)
      continue;
    tag.device = dev->i;
    tag.address = addr->i;
    tag.size = size->i;
    tag.category = parse_category(str_of(e.get("category")));
    if (tag.category == Category::Unknown) continue;
    tag.name = str_of(e.get("name"));
    tag.module = str_of(e.get("module"));
    out.push_back(std::move(tag));
  }
  return out;
}

AllocPhases find_phases(const Snapshot& snap, size_t device) {
  AllocPhases ph;
  auto [begin, end] =
      device < snap.device_count() ? snap.device_rows(device) : std::pair<uint32_t, uint32_t>{};
  PhaseFinder finder(snap, device, ph.modules);
  auto timeline = std::make_shared<PhaseTimeline>();
  Timeline& tl = timeline->tl;
  Phase last = Phase::Unknown;
  const Action* action = snap.trace.action.data();
  // Sized once: growing them would page in twice their memory.
  const auto allocs = static_cast<size_t>(std::count(action + begin, action + end, Action::Alloc));
  ph.allocs.reserve(allocs);
  timeline->run_of.reserve(allocs);
  for (uint32_t r = begin; r < end; ++r) {
    if (action[r] != Action::Alloc) continue;
    const AllocPhases::Alloc found = finder.at(r);
    ph.allocs.push_back(found);
    int32_t run = -1;
    if (known(found.phase)) {
      ++ph.sources.phase_allocs;
      tl.add(found.phase, static_cast<int32_t>(r - begin), last);
      run = static_cast<int32_t>(tl.runs.size() - 1);
    }
    timeline->run_of.push_back(run);
  }
  tl.finish();
  ph.sources.allocs = static_cast<int64_t>(ph.allocs.size());
  ph.sources.phases = finder.sources();
  ph.timeline = std::move(timeline);
  return ph;
}

BlockCategories classify_blocks(const Snapshot& snap, size_t device, const replay::Result& rr,
                                const std::vector<StorageTag>& tags) {
  return classify_blocks(snap, device, rr, tags, find_phases(snap, device));
}

BlockCategories classify_blocks(const Snapshot&, size_t device, const replay::Result& rr,
                                const std::vector<StorageTag>& tags, AllocPhases phases) {
  BlockCategories bc;
  bc.blocks.reserve(rr.blocks.size());  // each is made in the pass below, not zeroed first
  bc.modules = std::move(phases.modules);
  bc.sources = std::move(phases.sources);
  // The replay's blocks: those live at the start, then one per alloc entry.
  const std::vector<AllocPhases::Alloc>& found = phases.allocs;
  if (found.size() > rr.blocks.size()) throw std::logic_error("classify_blocks: another trace");
  const size_t first = rr.blocks.size() - found.size();

  const Timeline& tl = phases.timeline->tl;
  const std::vector<int32_t>& run_of = phases.timeline->run_of;

  std::vector<size_t> lasting;
  std::vector<int64_t> param_sizes;  // requested sizes of parameters, and of blocks kept throughout
  size_t next_run = 0;               // the first run starting after the current allocation
  for (size_t i = 0; i < rr.blocks.size(); ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    BlockClass& c = bc.blocks.emplace_back();
    if (l.alloc_event < 0 || i < first) {
      c.category = Category::BeforeRecording;
      if (l.free_requested == kOpen) param_sizes.push_back(l.requested);
      continue;
    }
    while (next_run < tl.runs.size() && tl.runs[next_run].start <= l.alloc_event) ++next_run;
    const int32_t f = l.free_requested;
    const size_t k = i - first;
    const Phase p = found[k].phase;
    c.module = found[k].module;
    c.phase = p;
    if (p == Phase::Unknown) {
      c.category = Category::Unknown;
      continue;
    }
    if (p == Phase::None) {
      if (next_run == tl.runs.size())
        c.category = f == kOpen ? Category::Unknown : Category::Temporary;
      else if (f < tl.runs[next_run].start)
        c.category = Category::Temporary;
      else
        c.category = until(f, tl.activation_horizon(tl.runs[next_run].pass)) ? Category::Activation
                                                                             : Category::Unknown;
      continue;
    }
    const Timeline::Run& run = tl.runs[static_cast<size_t>(run_of[k])];
    const Timeline::Pass& pass = tl.passes[run.pass];
    switch (p) {
      case Phase::Init:
        c.category = freed_before(f, run.end) ? Category::Temporary : Category::Parameter;
        if (c.category == Category::Parameter) param_sizes.push_back(l.requested);
        break;
      case Phase::Optimizer:
        c.category = freed_before(f, run.end) ? Category::Temporary : Category::OptimizerState;
        break;
      case Phase::Forward:
        c.category = freed_before(f, run.end)                        ? Category::Temporary
                     : until(f, tl.activation_horizon(run.pass + 1)) ? Category::Activation
                                                                     : Category::Unknown;
        break;
      case Phase::Recompute:
        c.category = freed_before(f, run.end)                         ? Category::Temporary
                     : freed_before(f, pass.end) || pass.end == kOpen ? Category::Activation
                                                                      : Category::Unknown;
        break;
      default:  // Backward
        if (freed_before(f, pass.end))
          c.category = Category::AutogradInternal;
        else if (pass.end == kOpen)  // the trace ended in this backward
          c.category = found[k].accumulate ? Category::Gradient : Category::AutogradInternal;
        else if (freed_before(f, tl.next_backward_end(run.pass)) || found[k].accumulate)
          c.category = Category::Gradient;  // freed by the next zero_grad, or AccumulateGrad's
        else
          lasting.push_back(i);  // a gradient kept, or a workspace the backward made
        break;
    }
  }
  // Made in a backward and kept from then on: gradients kept across steps
  // (zero_grad(set_to_none=False), the last step's) have a parameter's size;
  // what else lives on (the autograd thread's cuBLAS workspace) is unknown.
  if (!lasting.empty()) {
    for (const StorageTag& t : tags)
      if (t.device == static_cast<int64_t>(device) && t.category == Category::Parameter)
        param_sizes.push_back(t.size);
    std::sort(param_sizes.begin(), param_sizes.end());
    for (size_t i : lasting)
      bc.blocks[i].category =
          std::binary_search(param_sizes.begin(), param_sizes.end(), rr.blocks[i].requested)
              ? Category::Gradient
              : Category::Unknown;
  }
  apply_tags(tags, static_cast<int64_t>(device), rr, bc);
  return bc;
}

}  // namespace memsight
