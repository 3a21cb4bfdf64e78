#pragma once
// One device's (or group's) part of leaks_json.
#include <string>

#include "analysis/alike/alike.h"
#include "memsight/frames.h"
#include "memsight/leaks.h"

namespace memsight {

// Writes {"device":...} for r; with `alike`, the devices it stands for.
void leak_device_json(JsonWriter& w, const FrameClassifier& fc, const LeakReport& r,
                      const DeviceRanges* alike = nullptr);

}  // namespace memsight
