#pragma once
// Alike devices: per-device reports that are the same but for the device
// number (every device with nothing on it, or 100,000 devices of one
// allocation each) are made once and stand for all their devices, so that an
// output grows with what the snapshot holds, not with how many devices it
// names. One rule for every per-device report (summary, leaks, whatif, the
// page): devices are grouped after their analysis, on the reports' values
// (operator==, the device number aside), never on text made from them.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/json_writer.h"

namespace memsight {

// The devices of a group: ranges [first, last], ascending.
using DeviceRanges = std::vector<std::pair<int, int>>;

// Groups reports of devices given in ascending device order. A report's
// `hash` (of a few of its values) narrows the groups to compare it with.
class AlikeDevices {
 public:
  // The group an earlier device began whose report `same(group)` says
  // equals this one, `device` now one of its; or nullopt when there is none:
  // `device` begins a group (the last of members()), whose report the
  // caller keeps.
  template <class Same>
  std::optional<size_t> add(uint64_t hash, int device, Same&& same) {
    auto [first, last] = by_hash_.equal_range(hash);
    for (auto it = first; it != last; ++it)
      if (same(it->second)) {
        join(it->second, device);
        return it->second;
      }
    by_hash_.emplace(hash, members_.size());
    members_.push_back({{device, device}});
    return std::nullopt;
  }
  std::vector<DeviceRanges>& members() { return members_; }

 private:
  void join(size_t group, int device);
  std::unordered_multimap<uint64_t, size_t> by_hash_;
  std::vector<DeviceRanges> members_;
};

// Whether a new report equals a kept one but for its `device` (which is
// the new one's again on return).
template <class Report>
bool alike_reports(const Report& kept, Report& fresh) {
  const int device = fresh.device;
  fresh.device = kept.device;
  const bool same = kept == fresh;
  fresh.device = device;
  return same;
}

// Folds `v` into a hash (for AlikeDevices::add).
inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull;
}

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
