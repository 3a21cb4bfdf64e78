#pragma once
// What kind of memory each element of a device's memory timeline is, for the
// page: the classifier of memsight/categories.h over the device's replay.
#include <cstddef>
#include <string>

#include "memsight/snapshot.h"
#include "report/page_data.h"
#include "report/page_pack.h"

namespace memsight::report {

// Packs the device's "tl.cat" (per element: its category, | 0x80 when
// tagged) and "tl.mod" (0: no module; else 1 + index into the returned "modules")
// for `tl` as build_timeline made it (sources not yet made device-relative);
// returns the device's "cat" metadata: {"modules": [...], "tagged": N,
// "sources": "..."}.
std::string pack_categories(DeviceColumns& p, const Snapshot& snap, const Annotated& ann, size_t d,
                            const Timeline& tl);

}  // namespace memsight::report
