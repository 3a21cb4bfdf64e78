#pragma once
// The caching allocator replayed over one device's trace, block by block,
// so that its counters are torch's own: allocated_bytes (a block counts from
// its alloc until free_requested, by block size), active_bytes (until
// free_completed), requested_bytes (requested sizes, until free_completed)
// and reserved_bytes (segment sizes). A trace entry holds
// the requested size only; the block's size comes from torch's rounding and
// split rule applied to the free block the request was carved from.
// See docs/summary.md ("torch's numbers").

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight::replay {

// The allocator settings that decide block sizes (allocator_settings).
struct Config {
  int64_t max_split_size = INT64_MAX;
  bool expandable_segments = false;
  int64_t divisions[17] = {};  // roundup_power2_divisions per power-of-two interval from 1 MiB
  static Config from(const Snapshot& snap);
  int64_t round_size(int64_t requested) const;
};

struct Counters {
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;
};

// A block's life in the trace. Event indices are within the device's trace;
// kBefore: live when the trace began; kNever: not freed in it. Kept small:
// a big trace has hundreds of thousands.
struct Lifetime {
  static constexpr int32_t kBefore = -1, kNever = INT32_MAX;
  int64_t address = 0;
  int64_t size = 0;  // block size (exact, or estimated from the request)
  int64_t requested = 0;
  StackId stack = 0;
  int32_t alloc_event = kBefore;
  int32_t free_requested = kNever;  // allocated bytes stop counting here
  bool freed = false;               // free_completed seen: active bytes stopped
};

// Free memory inside the allocator's segments at one moment.
struct FreeSpace {
  int64_t bytes = 0, blocks = 0;
  int64_t largest_small = 0, largest_large = 0;  // largest free block per pool
  int64_t small_bytes = 0, large_bytes = 0;
  int64_t releasable = 0;  // bytes in segments with nothing live (empty_cache frees them)
};

// The allocator's state after one trace entry (-1: before the first).
struct OomState {
  int64_t event = 0;
  Counters at;
  FreeSpace free;
};

struct Result {
  Counters start, end, peak;
  int64_t peak_allocated_event = -1, peak_active_event = -1, peak_reserved_event = -1;
  std::vector<Lifetime> blocks;  // every block of the trace, in alloc order (initial ones first)
  std::vector<OomState> ooms;
  // The state after each event run() was asked for, in the order asked.
  std::vector<OomState> moments;
  // Blocks whose size had to be estimated (freed in the trace, allocated
  // before it), and allocations whose free block was not where the replay
  // expected it (the starting state was incomplete).
  int64_t estimated_blocks = 0, unplaced_allocs = 0;
  // Live blocks at the snapshot whose replayed size differs from the
  // snapshot's: 0 when the replay agrees with the allocator.
  int64_t size_mismatches = 0;
};

// `moments`: events (-1: before the first) whose state to keep in
// Result::moments; events outside the trace are left out.
Result run(const Snapshot& snap, size_t device, const Config& cfg,
           std::span<const int64_t> moments = {});

}  // namespace memsight::replay
