#pragma once
// One device of the page: its events, snapshot segments and blocks, both
// timelines, the state checkpoints and the flamegraphs, packed as columns.
#include <cstddef>
#include <string>

#include "memsight/snapshot.h"
#include "report/page_data.h"
#include "report/page_pack.h"
#include "report/page_tables.h"
#include "report/phase_timer.h"

namespace memsight::report {

// Packs device d's columns (the next device of `p`); returns its metadata as JSON.
std::string pack_device(DeviceColumns& p, PageTables& tables, const Snapshot& snap,
                        const Annotated& ann, size_t d, PhaseTimer& phase);

}  // namespace memsight::report
