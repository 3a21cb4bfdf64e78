#pragma once
// `memsight estimate` inside the engine (memsight/estimate.h): the runs of
// each device, the completed snapshot, and the answer's text and JSON.
#include <string>
#include <vector>

#include "allocator/alloc_rules.h"
#include "analysis/estimate/complete.h"
#include "analysis/whatif/whatif.h"
#include "memsight/estimate.h"

namespace memsight::estimate {

// What the answer is made of.
struct Answer {
  std::string settings;  // as a configuration string ("" for torch's defaults)
  std::vector<const DeviceRun*> devices;
  whatif::Report table;  // the standard alternatives over the same requests
};

std::string answer_text(const Answer& a);
std::string answer_json(const Answer& a);

// The top-level keys of the completed snapshot: the settings it was
// completed under (allocator_settings), the device (memsight_device_memory),
// the tags at the simulated addresses and memsight_estimate's record of it.
void complete_top_level(const Snapshot& in, const std::vector<DeviceRun>& runs,
                        const alloc::Settings& settings, Snapshot& out);

}  // namespace memsight::estimate
