#pragma once
// A top-level list of dicts that each name a device, grouped by that
// device once a snapshot: the external annotations (`external_annotations`,
// torch >= 2.5: {stage, name, device, time_us}), the device memory
// memsight's OOM observer records (`memsight_device_memory`: {device, total,
// limit}) and the storages memsight.torch tags (`memsight_tags` →
// `storages`: {device, addr, size, category, ...}). Every per-device reader
// takes its own from here (Snapshot::annotations(), device_memory(),
// storage_tags()): when each scanned the whole list, 10,000 devices and a
// million entries cost 10^10 steps. A dict without an integer `device`
// belongs to no device (torch and memsight.torch always record it).
#include <cstdint>
#include <span>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight {

class DeviceDicts {
 public:
  explicit DeviceDicts(const PyValue* list);
  // The dicts naming `device`, in the list's order.
  std::span<const PyValue* const> of(int64_t device) const;

 private:
  std::vector<int64_t> device_;       // ascending
  std::vector<const PyValue*> item_;  // beside device_: in the list's order within a device
};

}  // namespace memsight
