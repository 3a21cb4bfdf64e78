// The CUDA caching allocator's statistics, read straight from c10.
//
// torch.cuda.memory_stats() builds a nested dict of 122 numbers on every
// call; the line profiler samples at every line of a profiled function, so
// memsight reads the same numbers from c10's DeviceStats into an int64 array
// instead (see counters_abi.h). This file is compiled on first use against
// the installed torch's headers and linked to its libc10 (_native_counters.py);
// it never includes Python.h.
//
// Two ways in, chosen at build time:
// - default: c10::getDeviceAllocator(kCUDA), the device-generic allocator
//   interface of c10/core/CachingDeviceAllocator.h (torch 2.9 and later);
//   needs no CUDA headers.
// - MEMSIGHT_VIA_CUDA_HEADERS: c10/cuda/CUDACachingAllocator.h (older torch),
//   which needs the CUDA runtime's headers and links libc10_cuda.
#include <cstdint>
#include <cstring>
#include <exception>
#include <iterator>
#include <tuple>

#include "counters_abi.h"

#ifdef MEMSIGHT_VIA_CUDA_HEADERS
#include <c10/cuda/CUDACachingAllocator.h>
#else
#include <c10/core/CachingDeviceAllocator.h>
#endif

namespace {

// The names torch.cuda.memory_stats() gives, in the order read() fills them.
// Keep in step with read(): a GPU test compares both with torch's dict.
#define MEMSIGHT_STAT_ARRAY(name)                                                        \
  name ".all.current", name ".all.peak", name ".all.allocated", name ".all.freed",       \
      name ".small_pool.current", name ".small_pool.peak", name ".small_pool.allocated", \
      name ".small_pool.freed", name ".large_pool.current", name ".large_pool.peak",     \
      name ".large_pool.allocated", name ".large_pool.freed"
#define MEMSIGHT_STAT(name) name ".current", name ".peak", name ".allocated", name ".freed"

const char* const kNames[] = {
    MEMSIGHT_STAT_ARRAY("allocation"),
    MEMSIGHT_STAT_ARRAY("segment"),
    MEMSIGHT_STAT_ARRAY("active"),
    MEMSIGHT_STAT_ARRAY("inactive_split"),
    MEMSIGHT_STAT_ARRAY("allocated_bytes"),
    MEMSIGHT_STAT_ARRAY("reserved_bytes"),
    MEMSIGHT_STAT_ARRAY("active_bytes"),
    MEMSIGHT_STAT_ARRAY("inactive_split_bytes"),
    MEMSIGHT_STAT_ARRAY("requested_bytes"),
    MEMSIGHT_STAT("oversize_allocations"),
    MEMSIGHT_STAT("oversize_segments"),
    "num_alloc_retries",
    "num_ooms",
    "max_split_size",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
};
constexpr int kCount = static_cast<int>(std::size(kNames));

void put_error(char* err, int err_len, const char* what) {
  if (err == nullptr || err_len <= 0) return;
  std::strncpy(err, what, static_cast<std::size_t>(err_len) - 1);
  err[err_len - 1] = '\0';
}

template <class Stat>
int64_t* put_stat(int64_t* out, const Stat& s) {
  *out++ = s.current;
  *out++ = s.peak;
  *out++ = s.allocated;
  *out++ = s.freed;
  return out;
}

template <class StatArray>
int64_t* put_array(int64_t* out, const StatArray& a) {
  static_assert(std::tuple_size_v<StatArray> == 3, "kNames expects all, small_pool, large_pool");
  for (const auto& s : a) out = put_stat(out, s);  // all, small_pool, large_pool
  return out;
}

template <class Fn>
int guarded(char* err, int err_len, Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const std::exception& e) {
    put_error(err, err_len, e.what());
  } catch (...) {
    put_error(err, err_len, "unknown C++ exception");
  }
  return -1;
}

#ifdef MEMSIGHT_VIA_CUDA_HEADERS
auto stats_of(int device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
}
void reset_of(int device) {
  const auto d = static_cast<c10::DeviceIndex>(device);
  c10::cuda::CUDACachingAllocator::resetPeakStats(d);
  c10::cuda::CUDACachingAllocator::resetAccumulatedStats(d);
}
#else
c10::DeviceAllocator* allocator() { return c10::getDeviceAllocator(c10::DeviceType::CUDA); }
auto stats_of(int device) {
  return allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
}
void reset_of(int device) {
  const auto d = static_cast<c10::DeviceIndex>(device);
  allocator()->resetPeakStats(d);
  allocator()->resetAccumulatedStats(d);
}
#endif

int read(int device, int64_t* out, char* err, int err_len) {
  return guarded(err, err_len, [&] {
    const auto s = stats_of(device);
    int64_t* p = out;
    p = put_array(p, s.allocation);
    p = put_array(p, s.segment);
    p = put_array(p, s.active);
    p = put_array(p, s.inactive_split);
    p = put_array(p, s.allocated_bytes);
    p = put_array(p, s.reserved_bytes);
    p = put_array(p, s.active_bytes);
    p = put_array(p, s.inactive_split_bytes);
    p = put_array(p, s.requested_bytes);
    p = put_stat(p, s.oversize_allocations);
    p = put_stat(p, s.oversize_segments);
    *p++ = s.num_alloc_retries;
    *p++ = s.num_ooms;
    *p++ = s.max_split_size;
    *p++ = s.num_sync_all_streams;
    *p++ = s.num_device_alloc;
    *p++ = s.num_device_free;
  });
}

int reset(int device, char* err, int err_len) {
  return guarded(err, err_len, [&] { reset_of(device); });
}

const memsight_counters kTable = {MEMSIGHT_COUNTERS_ABI, kCount, kNames, read, reset};

}  // namespace

extern "C" __attribute__((visibility("default"))) const memsight_counters* memsight_counters() {
  return &kTable;
}
