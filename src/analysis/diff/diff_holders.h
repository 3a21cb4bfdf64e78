#pragma once
// diff's "by holder" rows: what each Python holder memsight.torch named at
// the two dumps keeps, before and after (docs/diff.md).
#include <string>

#include "memsight/diff.h"

namespace memsight {

// "\n  by holder (named by memsight.torch at each dump), largest change
// first:\n    the list `kept` (...): 11.0MiB -> 31.0MiB (+20.0MiB, +20 blocks)\n";
// "" unless both sides have holders (a moment that is not a dump has none).
std::string held_change_text(const DiffMoment& before, const DiffMoment& after);

}  // namespace memsight
