// The second half of the classifier (classify.h): each replayed block's
// category, from the run and pass it was made in (find_phases.cpp) and the
// event that freed it (docs/summary.md), then the storage tags over it.
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "analysis/kinds/classify.h"
#include "analysis/kinds/phase_timeline.h"
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
      if (freed_before(f, pass.end)) return Category::AutogradInternal;
      if (pass.end == kOpen)  // the trace ended in this backward
        return accumulate ? Category::Gradient : Category::AutogradInternal;
      if (freed_before(f, tl.next_backward_end(run.pass)) || accumulate)
        return Category::Gradient;  // freed by the next zero_grad, or AccumulateGrad's
      return std::nullopt;          // a gradient kept, or a workspace the backward made
  }
}

// Made in a backward and kept from then on: gradients kept across steps
// (zero_grad(set_to_none=False), the last step's) have a parameter's size;
// what else lives on (the autograd thread's cuBLAS workspace) is unknown.
// param_sizes: the requested sizes of parameters and of blocks kept
// throughout.
void settle_lasting(const std::vector<size_t>& lasting, std::vector<int64_t> param_sizes,
                    const std::vector<StorageTag>& tags, int64_t device, const replay::Result& rr,
                    BlockCategories& bc) {
  if (lasting.empty()) return;
  for (const StorageTag& t : tags)
    if (t.device == device && t.category == Category::Parameter) param_sizes.push_back(t.size);
  std::sort(param_sizes.begin(), param_sizes.end());
  for (size_t i : lasting)
    bc.blocks[i].category =
        std::binary_search(param_sizes.begin(), param_sizes.end(), rr.blocks[i].requested)
            ? Category::Gradient
            : Category::Unknown;
}

}  // namespace

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
  const PhaseTimeline& tl = *phases.timeline;

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
    const size_t k = i - first;
    const Phase p = found[k].phase;
    c.module = found[k].module;
    c.phase = p;
    if (p == Phase::Unknown) {
      c.category = Category::Unknown;
    } else if (p == Phase::None) {
      c.category = unphased_category(tl, next_run, l.free_requested);
    } else if (auto category = phased_category(tl, tl.runs[static_cast<size_t>(tl.run_of[k])], p,
                                               found[k].accumulate, l.free_requested)) {
      c.category = *category;
      if (c.category == Category::Parameter) param_sizes.push_back(l.requested);
    } else {
      lasting.push_back(i);
    }
  }
  settle_lasting(lasting, std::move(param_sizes), tags, static_cast<int64_t>(device), rr, bc);
  apply_tags(tags, static_cast<int64_t>(device), rr, bc);
  return bc;
}

}  // namespace memsight
