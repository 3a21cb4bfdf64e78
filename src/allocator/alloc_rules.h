#pragma once
// torch's CUDA caching allocator, its settings and the rules that size its
// blocks and segments: the one copy both the replay (which follows a
// recorded trace) and the simulation (which makes the allocator's decisions
// itself) apply. Behaviour as in c10/cuda/CUDACachingAllocator.cpp: requests
// are rounded to 512 bytes (or to power-of-two divisions), requests up to
// 1 MiB use the small pool and its 2 MiB segments, larger ones the large
// pool (a 20 MiB segment below 10 MiB, else the request rounded to 2 MiB);
// a free block is split when the rest is worth keeping, and blocks of at
// least max_split_size are never split.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight::alloc {

constexpr int64_t kMinBlockSize = 512;
constexpr int64_t kSmallSize = int64_t{1} << 20;    // largest small-pool request
constexpr int64_t kSmallBuffer = int64_t{2} << 20;  // small-pool segment (and page) size
constexpr int64_t kLargeBuffer = int64_t{20}
                                 << 20;  // large segment below kMinLargeAlloc; page size
constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
constexpr int64_t kRoundLarge = int64_t{2} << 20;
constexpr int64_t kNoLimit = INT64_MAX;
constexpr int kDivisionIntervals = 16;  // roundup_power2_divisions: 1 MiB .. 32 GiB and beyond

// The settings that change where blocks go (PYTORCH_CUDA_ALLOC_CONF and
// torch.cuda.set_per_process_memory_fraction).
struct Settings {
  int64_t max_split_size = kNoLimit;              // max_split_size_mb
  int64_t max_non_split_rounding = kLargeBuffer;  // max_non_split_rounding_mb
  bool expandable_segments = false;
  double gc_threshold = 0;  // garbage_collection_threshold (acts only under a fraction)
  int64_t divisions[kDivisionIntervals] = {};  // roundup_power2_divisions per interval
  double memory_fraction = 0;                  // set_per_process_memory_fraction; 0: not set
  bool rounds_up = false;  // some divisions are above 1 (kept by apply/recorded)

  // The settings a snapshot recorded (allocator_settings), else torch's
  // defaults. A recorded value torch could not have run with (a threshold
  // of inf, a negative size) is left at torch's default; `ignored`, when
  // given, gets one line for each ("garbage_collection_threshold inf: not
  // in (0.0, 1.0)").
  static Settings recorded(const Snapshot& snap, std::vector<std::string>* ignored = nullptr);
  // Applies a PYTORCH_CUDA_ALLOC_CONF-style string ("expandable_segments:True,
  // max_split_size_mb:128"), plus per_process_memory_fraction:F, and
  // "defaults" (torch's defaults, before the keys after it). Throws Error
  // naming the bad key or value.
  void apply(std::string_view conf);
  // The settings that differ from torch's defaults, as a conf string ("" for none).
  std::string conf() const;
  bool operator==(const Settings& o) const;
};

int64_t round_power2_divisions(const Settings& s, int64_t requested);
inline int64_t round_size(const Settings& s, int64_t requested) {
  if (requested < kMinBlockSize) return kMinBlockSize;
  int64_t rounded = (requested + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
  // roundup_power2_divisions applies from 512 bytes times the divisions up.
  return s.rounds_up ? round_power2_divisions(s, requested) : rounded;
}
inline bool small_request(int64_t rounded) { return rounded <= kSmallSize; }
// The segment a request needs when no cached block fits (cudaMalloc size).
int64_t allocation_size(int64_t rounded);
// Whether carving `size` out of a free block of `block_size` leaves a block.
inline bool should_split(const Settings& s, bool small_pool, int64_t block_size, int64_t size) {
  int64_t remaining = block_size - size;
  if (small_pool || s.expandable_segments) return remaining >= kMinBlockSize;
  return size < s.max_split_size && remaining > kSmallSize;
}
// get_free_block's oversize rules: whether a free block of `block_size`
// (the smallest that fits) may serve a request of `size`.
bool may_serve(const Settings& s, int64_t size, int64_t block_size);
// An expandable segment's page: 2 MiB in the small pool, 20 MiB in the large.
inline int64_t page_size(bool small_pool) { return small_pool ? kSmallBuffer : kLargeBuffer; }

}  // namespace memsight::alloc
