#pragma once
// The snapshot's external annotations (the top-level `external_annotations`
// list, torch >= 2.5: {stage, name, device, time_us}) grouped by the device
// each names, built once a snapshot (Snapshot::annotations()). Every
// per-device reader takes its own from here: when each scanned the whole
// list, a snapshot of 10,000 devices and a million annotations cost 10^10
// steps. An annotation without an integer `device` belongs to no device
// (torch always records it).
#include <cstdint>
#include <span>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight {

class AnnotationIndex {
 public:
  explicit AnnotationIndex(const Snapshot& snap);
  // The annotations (dicts) naming `device`, in the list's order.
  std::span<const PyValue* const> of(int64_t device) const;

 private:
  std::vector<int64_t> device_;       // ascending
  std::vector<const PyValue*> item_;  // beside device_: in the list's order within a device
};

}  // namespace memsight
