#pragma once
// The runs and passes that the phases of a device's allocations form: the
// half of the classifier that find_phases() builds from the trace and
// classify_blocks() reads beside the replay.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "analysis/kinds/classify.h"

namespace memsight {

// Backward and recompute are one group: a recompute runs inside a backward.
enum class PassGroup : uint8_t { Init, Forward, Backward, Optimizer };
inline PassGroup group_of(Phase p) {
  switch (p) {
    case Phase::Init:
      return PassGroup::Init;
    case Phase::Forward:
      return PassGroup::Forward;
    case Phase::Optimizer:
      return PassGroup::Optimizer;
    default:
      return PassGroup::Backward;  // Backward, Recompute
  }
}
inline bool known_phase(Phase p) { return p != Phase::Unknown && p != Phase::None; }

// Consecutive allocations of one phase (runs) and of one group (passes).
// Each ends where the next begins; the last ones are open.
struct PhaseTimeline {
  static constexpr int32_t kOpen = replay::Lifetime::kNever;
  struct Run {
    int32_t start, end;
    uint32_t pass;
  };
  struct Pass {
    PassGroup group;
    int32_t start, end;
    int32_t last;  // its last allocation: what is freed after it, the pass did not need
  };
  std::vector<Run> runs;
  std::vector<Pass> passes;
  std::vector<int32_t> first_backward, first_forward;  // from pass i on; -1: none
  std::vector<int32_t> run_of;  // per alloc entry: its run; -1: no known phase

  // Called once per allocation of a known phase, in trace order.
  void add(Phase p, int32_t event, Phase& last) {
    if (!runs.empty() && p == last) {
      passes.back().last = event;
      return;
    }
    PassGroup g = group_of(p);
    if (passes.empty() || passes.back().group != g) {
      if (!passes.empty()) passes.back().end = event;
      passes.push_back({g, event, kOpen, event});
    }
    passes.back().last = event;
    if (!runs.empty()) runs.back().end = event;
    runs.push_back({event, kOpen, static_cast<uint32_t>(passes.size() - 1)});
    last = p;
  }

  void finish() {
    first_backward.assign(passes.size() + 1, -1);
    first_forward.assign(passes.size() + 1, -1);
    for (size_t i = passes.size(); i-- > 0;) {
      first_backward[i] =
          passes[i].group == PassGroup::Backward ? static_cast<int32_t>(i) : first_backward[i + 1];
      first_forward[i] =
          passes[i].group == PassGroup::Forward ? static_cast<int32_t>(i) : first_forward[i + 1];
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

}  // namespace memsight
