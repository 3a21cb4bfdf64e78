#pragma once
// The caching allocator replayed over one device's trace, block by block,
// so that its counters are torch's own: allocated_bytes (a block counts from
// its alloc until free_requested, by block size), active_bytes (until
// free_completed), requested_bytes (requested sizes, until free_completed)
// and reserved_bytes (segment sizes). A trace entry holds the requested size
// only; the block's size comes from torch's rounding and split rules
// (alloc_rules.h) applied to the free block at the recorded address. The
// replay is the simulation (simulate.h) with every decision taken from the
// record: both move one CachingAllocator. See docs/summary.md ("torch's
// numbers").

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "allocator/caching_allocator.h"
#include "memsight/snapshot.h"

namespace memsight::replay {

using Counters = alloc::Counters;
using FreeSpace = alloc::FreeSpace;

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

// The allocator's state after one trace entry (-1: before the first).
struct OomState {
  int64_t event = 0;
  Counters at;
  FreeSpace free;
};

struct Result {
  Counters start, end, peak;
  int64_t peak_allocated_event = -1, peak_active_event = -1, peak_reserved_event = -1;
  Column<Lifetime> blocks;  // every block of the trace, in alloc order (initial ones first)
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

// How many blocks were allocated at or before `event` (-1: the blocks from
// before the trace): Result::blocks is in alloc order, so they are its
// first ones, and a moment's live blocks are among them.
inline size_t allocated_by(const Result& r, int64_t event) {
  return static_cast<size_t>(
      std::upper_bound(r.blocks.begin(), r.blocks.end(), event,
                       [](int64_t e, const Lifetime& l) { return e < l.alloc_event; }) -
      r.blocks.begin());
}

// `moments`: events (-1: before the first) whose state to keep in
// Result::moments; events outside the trace are left out.
Result run(const Snapshot& snap, size_t device, const alloc::Settings& settings,
           std::span<const int64_t> moments = {});

}  // namespace memsight::replay
