#pragma once
// What to look for when a site leaks. The allocator's history records where
// each block was allocated, never what keeps it alive, so the advice names
// the kinds of holder that fit how the blocks were made (their phase) and
// how to find the one at hand; it never offers tensor.detach(), which keeps
// the same bytes.
#include <string>

#include "memsight/leaks.h"

namespace memsight {

// `site`: the leaking site the report cites (allocated at); `sites`: how many
// sites leak; `holders_recorded`: the snapshot carries memsight.torch's
// record of who holds its live tensors (top-level `memsight_holders`).
std::string leak_advice(const LeakSite& site, size_t sites, bool holders_recorded);

}  // namespace memsight
