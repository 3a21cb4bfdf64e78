// A stand-in for torch's c10/core/CachingDeviceAllocator.h with the same
// names and field order, so tests can compile memsight's real native counter
// reader (python/memsight/torch/native/counters.cpp) without torch's headers.
// Every counter holds a distinct number (see fill()), so a name read from the
// wrong field shows. test_native_counters.py computes the same numbers.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>

namespace c10 {
using DeviceIndex = std::int8_t;
enum class DeviceType : std::int8_t { CPU = 0, CUDA = 1 };

namespace CachingDeviceAllocator {
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;
};
using StatArray = std::array<Stat, 3>;

struct DeviceStats {
  StatArray allocation;
  StatArray segment;
  StatArray active;
  StatArray inactive_split;
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  Stat oversize_allocations;
  Stat oversize_segments;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;
  std::int64_t num_device_free = 0;
  std::int64_t max_split_size = 0;
};
}  // namespace CachingDeviceAllocator

// Counter k (in the order of the fields above, Stat members in order) holds
// device * 100000 + k * 10 + resets, peaks and accumulated counters included.
struct DeviceAllocator {
  int resets = 0;
  CachingDeviceAllocator::DeviceStats getDeviceStats(DeviceIndex device) {
    if (device > 3) throw std::runtime_error("invalid device index");
    CachingDeviceAllocator::DeviceStats s;
    std::int64_t k = 0;
    auto next = [&] { return device * 100000 + 10 * k++ + resets; };
    auto stat = [&](CachingDeviceAllocator::Stat& x) {
      x.current = next();
      x.peak = next();
      x.allocated = next();
      x.freed = next();
    };
    for (auto* a :
         {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
          &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes})
      for (auto& x : *a) stat(x);
    s.num_alloc_retries = next();
    s.num_ooms = next();
    stat(s.oversize_allocations);
    stat(s.oversize_segments);
    s.num_sync_all_streams = next();
    s.num_device_alloc = next();
    s.num_device_free = next();
    s.max_split_size = next();
    return s;
  }
  void resetPeakStats(DeviceIndex) { ++resets; }
  void resetAccumulatedStats(DeviceIndex) {}
};

inline DeviceAllocator* getDeviceAllocator(DeviceType) {
  static DeviceAllocator instance;
  return &instance;
}
}  // namespace c10
