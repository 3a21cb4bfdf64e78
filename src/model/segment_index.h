#pragma once
// The snapshot's segments grouped by device once a snapshot
// (Snapshot::segments_by_device()): each device's replay takes its own
// instead of scanning every segment (10,000 devices and 100,000 segments of
// one of them cost 10^9 steps).
#include <cstdint>
#include <span>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight {

class SegmentIndex {
 public:
  explicit SegmentIndex(const Snapshot& snap);
  // Indices into Snapshot::segments of the device's segments, in order.
  std::span<const uint32_t> of(int64_t device) const;

 private:
  std::vector<int64_t> device_;  // ascending
  std::vector<uint32_t> segment_;
};

}  // namespace memsight
