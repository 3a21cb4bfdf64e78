#pragma once
// The summary's "held at the dump" line: the live blocks of a device by the
// Python holder memsight.torch named at the dump (memsight_holders).
#include <string>

#include "memsight/holders.h"

namespace memsight {

// "  Held at the dump (named by memsight.torch): the list `kept` (train.py,
// `__main__`) 12 blocks, 12.0MiB; ..." for `device`; nothing without holders.
void held_text(std::string& out, const Snapshot& snap, const Holders& holders, int64_t device);

}  // namespace memsight
