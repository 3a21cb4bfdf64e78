#pragma once
// Names the cause of an out-of-memory error from the allocator's state at
// that moment, with the facts behind it and what to change.
#include "memsight/summary.h"

namespace memsight {

// Fills verdict, causes, explanation and remedies of `o` from its numbers.
// `holder`: the live site holding most memory at the OOM (empty if none).
void diagnose_oom(OomReport& o, const SiteStat& holder, bool expandable_segments);

// Cites what the allocator simulation found for this OOM (whatif/): the
// sentence, and the setting that fits (or that none does) as the first
// remedy, in place of the generic advice to expand segments.
void cite_fix(OomReport& o, const SimulatedFix& fix);

}  // namespace memsight
