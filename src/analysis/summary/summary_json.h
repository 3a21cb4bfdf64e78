#pragma once
// One device's summary as summary_json writes it.
#include <string>
#include <utility>
#include <vector>

#include "memsight/frames.h"
#include "memsight/summary.h"
#include "util/json_writer.h"

namespace memsight {

// Appends {"device":...} for d; with `alike`, the devices summarised by it
// as "alike":[[first,last],...] (the page's form of a group).
void device_json(JsonWriter& w, const FrameClassifier& fc, const DeviceSummary& d,
                 const std::vector<std::pair<int, int>>* alike = nullptr);

}  // namespace memsight
