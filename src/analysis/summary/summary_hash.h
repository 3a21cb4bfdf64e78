#pragma once
// The hash by which summarize() finds a device's alike group
// (analysis/alike/value_hash.h): every field of the summary but the device
// number, its times as they are (the caller counts them from the device's
// first entry, as the comparison does).
#include <cstdint>

#include "memsight/summary.h"

namespace memsight {

uint64_t alike_hash(const DeviceSummary& ds);

}  // namespace memsight
