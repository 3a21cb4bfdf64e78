#include "analysis/alike/alike.h"

namespace memsight {

void AlikeDevices::join(size_t group, int device) {
  DeviceRanges& ranges = members_[group];
  if (ranges.back().second == device - 1)
    ranges.back().second = device;
  else
    ranges.emplace_back(device, device);
}

std::string devices_heading(int device, const DeviceRanges& ranges) {
  size_t count = 0;
  for (auto [a, b] : ranges) count += static_cast<size_t>(b - a) + 1;
  if (count <= 1) return "Device " + std::to_string(device);
  std::string out = "Devices ";
  constexpr size_t kNamed = 8;
  for (size_t i = 0; i < ranges.size() && i < kNamed; ++i) {
    auto [a, b] = ranges[i];
    if (i) out += ", ";
    out += std::to_string(a);
    if (b > a) out += (b == a + 1 ? ", " : "-") + std::to_string(b);
  }
  if (ranges.size() > kNamed) out += ", ...";
  return out + " (" + std::to_string(count) + " alike)";
}

void append_alike_json(JsonWriter& w, const DeviceRanges& ranges) {
  w.key("alike").begin_array();
  for (auto [first, last] : ranges) w.begin_array().value(first).value(last).end_array();
  w.end_array();
}

}  // namespace memsight
