#pragma once
// The summary's "held at the dump" line: the live blocks of a device by the
// Python holder memsight.torch named at the dump (memsight_holders).
#include <string>
#include <vector>

#include "memsight/holders.h"

namespace memsight {

// "  Held at the dump (named by memsight.torch): the list `kept` (train.py,
// `__main__`) 12 blocks, 12.0MiB; ..." from a device's held_amounts(),
// largest first; nothing when there are none.
void held_text(std::string& out, const std::vector<HeldAmount>& rows);

}  // namespace memsight
