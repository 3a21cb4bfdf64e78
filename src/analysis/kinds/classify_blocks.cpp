// The second half of the classifier (classify.h): each replayed block's
// category, from the run and pass it was made in (find_phases.cpp) and the
// event that freed it (docs/summary.md), then the storage tags over it.
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "analysis/kinds/classify.h"
#include "analysis/kinds/phase_timeline.h"
#include "analysis/kinds/stack_phases.h"
#include "analysis/kinds/storage_tags.h"

namespace memsight {
namespace {

constexpr int32_t kOpen = replay::Lifetime::kNever;

bool freed_before(int32_t free_requested, int32_t end) {
  return free_requested != kOpen && free_requested < end;
}
bool until(int32_t free_requested, int32_t horizon) {
  return horizon == kOpen || free_requested < horizon;
}

// A block made outside any phase (Phase::None) and freed at f, by the first
// run that starts after it was made (next_run; runs.size(): none).
Category unphased_category(const PhaseTimeline& tl, size_t next_run, int32_t f) {
  if (next_run == tl.runs.size()) return f == kOpen ? Category::Unknown : Category::Temporary;
  if (f < tl.runs[next_run].start) return Category::Temporary;
  return until(f, tl.activation_horizon(tl.runs[next_run].pass)) ? Category::Activation
                                                                 : Category::Unknown;
}

// A block made in a run of known phase p and freed at f; nullopt for one
// made in a backward and kept from then on (settle_lasting decides).
std::optional<Category> phased_category(const PhaseTimeline& tl, const PhaseTimeline::Run& run,
                                        Phase p, bool accumulate, int32_t f) {
  const PhaseTimeline::Pass& pass = tl.passes[run.pass];
  switch (p) {
    case Phase::Init:
      return freed_before(f, run.end) ? Category::Temporary : Category::Parameter;
    case Phase::Optimizer:
      return freed_before(f, run.end) ? Category::Temporary : Category::OptimizerState;
    case Phase::Forward:
      return freed_before(f, run.end)                        ? Category::Temporary
             : until(f, tl.activation_horizon(run.pass + 1)) ? Category::Activation
                                                             : Category::Unknown;
    case Phase::Recompute:
      return freed_before(f, run.end)                         ? Category::Temporary
             : freed_before(f, pass.end) || pass.end == kOpen ? Category::Activation
                                                              : Category::Unknown;
    default:  // Backward
      if (freed_before(f, pass.end) && f <= pass.last) return Category::AutogradInternal;
      if (freed_before(f, pass.end)) return std::nullopt;  // freed in its tail: settle_tail
      if (pass.end == kOpen)                               // the trace ended in this backward
        return accumulate ? Category::Gradient : Category::AutogradInternal;
      if (freed_before(f, tl.next_backward_end(run.pass)) || accumulate)
        return Category::Gradient;  // freed by the next zero_grad, or AccumulateGrad's
      return std::nullopt;          // a gradient kept, or a workspace the backward made
  }
}

// Who freed a block made in a backward after the backward's last
// allocation (its tail), by the stack of the free: zero_grad (any frame
// of that name), the backward itself (a `backward` frame, or no frames at
// all on a trace that records them: the autograd thread), or not known
// (no stacks on frees, or other code).
enum class TailFree { ZeroGrad, Backward, NotKnown };
TailFree tail_free(const Snapshot& snap, size_t device, int32_t event) {
  const uint32_t row = snap.device_rows(device).first + static_cast<uint32_t>(event);
  const StackId s = snap.trace.stack[row];
  if (!s)
    return shape_has(snap, snap.trace.shape[row], Field::Frames) ? TailFree::Backward
                                                                 : TailFree::NotKnown;
  TailFree out = TailFree::NotKnown;
  for (FrameId id : snap.frames.stack(s)) {
    std::string_view name = snap.str(snap.frames.frame(id).name);
    if (name == "zero_grad") return TailFree::ZeroGrad;
    if (name == "backward") out = TailFree::Backward;
  }
  return out;
}

// Made in a backward and freed after its last allocation, before the next
// phase began (an optimizer that allocates nothing, SGD's later steps, does
// not end the backward): a gradient when zero_grad freed it, or when no
// stack says and it has a parameter's size; else what the backward freed
// as it returned.
Category tail_category(TailFree by, int64_t requested, const std::vector<int64_t>& param_sizes) {
  if (by == TailFree::ZeroGrad) return Category::Gradient;
  if (by == TailFree::NotKnown &&
      std::binary_search(param_sizes.begin(), param_sizes.end(), requested))
    return Category::Gradient;
  return Category::AutogradInternal;
}

// Made in a backward and kept past it with no next backward to free it
// (`lasting`), or freed in the backward's tail (`tail`): gradients kept
// across steps (zero_grad(set_to_none=False), the last step's) have a
// parameter's size; what else lives on (the autograd thread's cuBLAS
// workspace) is unknown, or, where a communication library made it, a
// communication buffer. param_sizes: the requested sizes of parameters and
// of blocks kept throughout.
struct Unsettled {
  std::vector<size_t> lasting, tail;
};
void settle(const Unsettled& u, std::vector<int64_t> param_sizes,
            const std::vector<StorageTag>& tags, const Snapshot& snap, size_t device,
            const replay::Result& rr, BlockCategories& bc) {
  if (u.lasting.empty() && u.tail.empty()) return;
  for (const StorageTag& t : tags)
    if (t.device == static_cast<int64_t>(device) && t.category == Category::Parameter)
      param_sizes.push_back(t.size);
  std::sort(param_sizes.begin(), param_sizes.end());
  for (size_t i : u.lasting) {
    Category& c = bc.blocks[i].category;
    const bool comm = c == Category::Communication;
    c = std::binary_search(param_sizes.begin(), param_sizes.end(), rr.blocks[i].requested)
            ? Category::Gradient
        : comm ? Category::Communication
               : Category::Unknown;
  }
  for (size_t i : u.tail) {
    Category& c = bc.blocks[i].category;
    const Category t = tail_category(tail_free(snap, device, rr.blocks[i].free_requested),
                                     rr.blocks[i].requested, param_sizes);
    c = t == Category::Gradient || c != Category::Communication ? t : Category::Communication;
  }
}

// A block live before the trace whose stack was recorded, kept since.
Category recorded_category(const Snapshot& snap, StackId s, std::optional<StackPhases>& stacks) {
  if (!stacks) stacks.emplace(snap, snap.blocks.size());
  const StackPhases::Found f = stacks->of(s);
  if (f.hint == KindHint::Communication) return Category::Communication;
  if (f.hint == KindHint::Parameter || f.phase == Phase::Init) return Category::Parameter;
  if (f.phase == Phase::Optimizer) return Category::OptimizerState;
  return Category::Unknown;
}

}  // namespace

BlockCategories classify_blocks(const Snapshot& snap, size_t device, const replay::Result& rr,
                                const std::vector<StorageTag>& tags) {
  return classify_blocks(snap, device, rr, tags, find_phases(snap, device));
}

BlockCategories classify_blocks(const Snapshot& snap, size_t device, const replay::Result& rr,
                                const std::vector<StorageTag>& tags, AllocPhases phases) {
  BlockCategories bc;
  bc.blocks.reserve(rr.blocks.size());  // each is made in the pass below, not zeroed first
  bc.modules = std::move(phases.modules);
  bc.sources = std::move(phases.sources);
  // The replay's blocks: those live at the start, then one per alloc entry.
  const std::vector<AllocPhases::Alloc>& found = phases.allocs;
  if (found.size() > rr.blocks.size()) throw std::logic_error("classify_blocks: another trace");
  const size_t first = rr.blocks.size() - found.size();
  const PhaseTimeline& tl = *phases.timeline;

  std::optional<StackPhases> stacks;  // made on the first block that needs it
  const bool state_only = device >= snap.device_count() ||
                          snap.device_rows(device).first == snap.device_rows(device).second;
  Unsettled unsettled;
  std::vector<int64_t> param_sizes;  // requested sizes of parameters, and of blocks kept throughout
  size_t next_run = 0;               // the first run starting after the current allocation
  for (size_t i = 0; i < rr.blocks.size(); ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    BlockClass& c = bc.blocks.emplace_back();
    if (l.alloc_event < 0 || i < first) {
      // With no trace (enabled="state"), a recorded stack says it was
      // allocated while recording: kept since, by what the stack says.
      c.category = state_only && l.stack ? recorded_category(snap, l.stack, stacks)
                                         : Category::BeforeRecording;
      if (l.free_requested == kOpen) param_sizes.push_back(l.requested);
      continue;
    }
    while (next_run < tl.runs.size() && tl.runs[next_run].start <= l.alloc_event) ++next_run;
    const AllocPhases::Alloc& a = found[i - first];
    c.module = a.module;
    c.phase = a.phase;
    const int32_t run = tl.run_of[i - first];
    // A communication library's block made in a backward may be a gradient
    // (FSDP2's reduce-scatter output is the sharded .grad): the backward's
    // rules say which; any other is a communication buffer.
    const bool comm = a.hint == KindHint::Communication;
    if (a.hint == KindHint::Parameter) {
      c.category = Category::Parameter;
    } else if (a.phase == Phase::Unknown) {
      c.category = Category::Unknown;
    } else if (a.phase == Phase::None || run < 0) {
      c.category =
          comm ? Category::Communication : unphased_category(tl, next_run, l.free_requested);
    } else if (auto category = phased_category(tl, tl.runs[static_cast<size_t>(run)], a.phase,
                                               a.accumulate, l.free_requested)) {
      c.category = comm && *category != Category::Gradient ? Category::Communication : *category;
    } else {
      c.category = comm ? Category::Communication : Category::Unknown;
      (l.free_requested == kOpen ||
               !freed_before(l.free_requested,
                             tl.passes[tl.runs[static_cast<size_t>(run)].pass].end)
           ? unsettled.lasting
           : unsettled.tail)
          .push_back(i);
    }
    if (c.category == Category::Parameter) param_sizes.push_back(l.requested);
  }
  settle(unsettled, std::move(param_sizes), tags, snap, device, rr, bc);
  apply_tags(tags, static_cast<int64_t>(device), rr, bc);
  return bc;
}

}  // namespace memsight
