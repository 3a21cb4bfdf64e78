#include "model/segment_index.h"

#include <algorithm>
#include <mutex>
#include <numeric>

namespace memsight {

SegmentIndex::SegmentIndex(const Snapshot& snap) {
  segment_.resize(snap.segments.size());
  std::iota(segment_.begin(), segment_.end(), 0u);
  std::stable_sort(segment_.begin(), segment_.end(), [&](uint32_t a, uint32_t b) {
    return snap.segments[a].device < snap.segments[b].device;
  });
  device_.reserve(segment_.size());
  for (uint32_t s : segment_) device_.push_back(snap.segments[s].device);
}

std::span<const uint32_t> SegmentIndex::of(int64_t device) const {
  auto [lo, hi] = std::equal_range(device_.begin(), device_.end(), device);
  return {segment_.data() + (lo - device_.begin()), static_cast<size_t>(hi - lo)};
}

const SegmentIndex& Snapshot::segments_by_device() const {
  std::lock_guard<std::mutex> lock(segments_by_device_.mutex);
  if (!segments_by_device_.index)
    segments_by_device_.index = std::make_shared<const SegmentIndex>(*this);
  return *segments_by_device_.index;
}

}  // namespace memsight
