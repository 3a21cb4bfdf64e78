#pragma once
// What a person wants to know first about a snapshot: how high memory went
// and when, what was live at the peak, how fragmented the cache is, and why
// each out-of-memory error happened.

#include <cstdint>
#include <string>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight {

struct SiteStat {
  StackId stack = 0;  // allocation stack (0: unknown, e.g. made before recording)
  int64_t bytes = 0;
  int64_t count = 0;
};

struct OomReport {
  uint32_t event = 0;  // index within the device's trace
  int64_t time_us = 0;
  int64_t requested = 0;     // bytes the failed request asked for
  int64_t device_free = 0;   // free on the device per cudaMemGetInfo
  int64_t allocated = 0;     // live allocations at that moment (requested sizes)
  int64_t reserved = 0;      // bytes in the allocator's segments
  int64_t cached_free = 0;   // reserved but not allocated
  int64_t largest_free = 0;  // largest contiguous free range inside a segment
  StackId stack = 0;         // where the request came from, if recorded
  std::string verdict;       // "limit", "fragmentation" or "demand"
  std::string explanation;   // plain-language diagnosis
};

struct DeviceSummary {
  int device = 0;
  size_t entries = 0;
  // Over the trace, replayed from the snapshot state backwards; event -1
  // means the peak is the state before the first recorded event.
  int64_t peak_allocated = 0;
  int64_t peak_allocated_event = -1;
  int64_t peak_allocated_time_us = 0;
  int64_t peak_reserved = 0;
  int64_t peak_reserved_event = -1;
  int64_t peak_reserved_time_us = 0;
  std::vector<SiteStat> top_sites;  // live at the allocated peak, largest first (10)
  // At the snapshot (the end of the trace).
  int64_t allocated_now = 0;  // requested bytes of active blocks
  int64_t reserved_now = 0;
  int64_t free_now = 0;  // bytes of inactive blocks
  int64_t largest_free_now = 0;
  int64_t free_blocks_now = 0;
  double fragmentation = 0;  // 1 - largest_free / free (0 when nothing is free)
  int64_t segments_now = 0;
  // Frees of allocations the trace never saw: made before recording began or
  // dropped when the history buffer wrapped.
  int64_t orphan_frees = 0;
  std::string history_wrapped;  // "yes", "no" or "possibly"
  std::vector<OomReport> ooms;
};

struct Summary {
  std::vector<DeviceSummary> devices;
  size_t total_entries = 0;
};

Summary summarize(const Snapshot& snap);
std::string summary_text(const Snapshot& snap, const Summary& s);
std::string summary_json(const Snapshot& snap, const Summary& s);
// A stack as short readable text: innermost user frames first.
std::string describe_stack(const Snapshot& snap, StackId stack, size_t max_frames = 3);

}  // namespace memsight
