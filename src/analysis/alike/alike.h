#pragma once
// Alike devices: per-device reports that read the same but for the device
// number (every device with nothing on it, or 100,000 devices of one
// allocation each) are made once and stand for all their devices, so that an
// output grows with what the snapshot holds, not with how many devices it
// names. One rule for every per-device report (summary, leaks, the page):
// devices are alike when their reports' JSON, with the device number set to
// 0, is the same, and so is whatever else their text shows.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/json_writer.h"

namespace memsight {

// The devices of a group: ranges [first, last], ascending.
using DeviceRanges = std::vector<std::pair<int, int>>;

// Groups devices by their reports' keys, given in ascending device order.
class AlikeDevices {
 public:
  // The group an earlier device with this key began, `device` now one of
  // its; or nullopt when the key is new: `device` begins a group (the last
  // of members()), whose report the caller keeps.
  std::optional<size_t> add(std::string key, int device);
  std::vector<DeviceRanges>& members() { return members_; }

 private:
  std::unordered_map<std::string, size_t> group_of_;
  std::vector<DeviceRanges> members_;
};

// "Device 3", or for a group of alike devices "Devices 0-7, 9 (9 alike)":
// at most 8 ranges are named.
std::string devices_heading(int device, const DeviceRanges& ranges);
// Whether the group holds more than one device.
inline bool several(const DeviceRanges& ranges) {
  return ranges.size() > 1 || (!ranges.empty() && ranges[0].first != ranges[0].second);
}
// "alike":[[first,last],...], a field of the group's object.
void append_alike_json(JsonWriter& w, const DeviceRanges& ranges);

// Keeps, of each group, the devices in `devices` (a page holds a few): a
// group with none goes, the others are named by their first kept device.
// `reports` and `members` are parallel; a report names its group by `device`.
template <class Report>
void keep_devices(std::vector<Report>& reports, std::vector<DeviceRanges>& members,
                  std::vector<size_t> devices) {
  std::sort(devices.begin(), devices.end());
  size_t kept = 0;
  for (size_t g = 0; g < reports.size(); ++g) {
    DeviceRanges ranges;
    for (auto [a, b] : members[g])
      for (auto it = std::lower_bound(devices.begin(), devices.end(), static_cast<size_t>(a));
           it != devices.end() && *it <= static_cast<size_t>(b); ++it) {
        const int d = static_cast<int>(*it);
        if (!ranges.empty() && ranges.back().second == d - 1)
          ranges.back().second = d;
        else
          ranges.emplace_back(d, d);
      }
    if (ranges.empty()) continue;
    if (kept != g) reports[kept] = std::move(reports[g]);
    reports[kept].device = ranges.front().first;
    members[kept++] = std::move(ranges);
  }
  reports.resize(kept);
  members.resize(kept);
}

}  // namespace memsight
