#pragma once
// Live allocations at one moment of a replay, grouped by site (the frame
// rule of memsight/frames.h). Blocks from before the recording are counted
// apart: they have no allocation event to name a site.
#include <vector>

#include "allocator/replay.h"
#include "memsight/frames.h"
#include "memsight/summary.h"

namespace memsight {

struct SiteGroups {
  std::vector<SiteStat> sites;  // the largest `keep`, largest first
  size_t total = 0;             // sites in all
  int64_t before_bytes = 0, before_count = 0;
};

// Blocks allocated (not yet free_requested) after trace entry `event`
// (-1: before the first entry). Only the `keep` largest sites are labelled
// and returned (ties: by label). `state_only`: the device has no trace, so
// a block with a recorded stack was allocated while recording (enabled=
// "state") and is grouped by its site, not as before recording.
SiteGroups group_sites(const FrameClassifier& fc, const replay::Result& rr, int64_t event,
                       size_t keep, bool state_only = false);

}  // namespace memsight
