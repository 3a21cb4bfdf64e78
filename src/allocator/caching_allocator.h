#pragma once
// The state of torch's DeviceCachingAllocator for one device, and the moves
// that change it, as c10/cuda/CUDACachingAllocator.cpp makes them: blocks
// carved from free blocks (split by alloc_rules), freed blocks merged with
// free neighbours, segments added and released, expandable segments' pages
// mapped and unmapped, with torch's counters (allocated, active, requested,
// reserved bytes) and their peaks. The replay drives it from a recorded
// trace (where each block went is known); the simulation decides where
// blocks go itself (simulate.cpp). Neither holds a rule of its own.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "allocator/address_map.h"
#include "allocator/alloc_rules.h"
#include "allocator/free_set.h"
#include "allocator/unmapped_index.h"

namespace memsight::alloc {

constexpr uint32_t kNone = UINT32_MAX;

struct Block {
  int64_t addr = 0, size = 0;
  int64_t requested = 0;
  int64_t gc_base = 0;  // the pool's free-block search count when this block was freed
  uint32_t prev = kNone, next = kNone;  // neighbours in the segment
  uint32_t tag = kNone;                 // the driver's (the replay's block lifetime)
  uint16_t stream = 0;                  // rank of the stream, streams ordered by value
  uint16_t pool = 0;                    // index into CachingAllocator::pools
  uint16_t va = 0;                      // expandable: 1 + index into vas; 0: cudaMalloc'd
  bool allocated = false;
  bool pending = false;   // freed while other streams still use it (record_stream)
  bool mapped = true;     // false: expandable address space without pages
  bool detached = false;  // in no segment: the replay could not place it
  bool used = false;      // the slot holds a block
  bool split() const { return prev != kNone || next != kNone; }
  bool mergeable() const { return used && !allocated && !pending && !detached; }
};

struct Counters {
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;
  bool operator==(const Counters&) const = default;
};

// Free memory inside the segments at one moment.
struct FreeSpace {
  int64_t bytes = 0, blocks = 0;
  int64_t largest_small = 0, largest_large = 0;  // largest free block per pool kind
  int64_t small_bytes = 0, large_bytes = 0;
  int64_t releasable =
      0;  // bytes of cudaMalloc'd segments with nothing live (empty_cache frees them)
  bool operator==(const FreeSpace&) const = default;
};

struct Pool {
  bool small = false;
  int64_t id[2] = {0, 0};  // (0, 0): the default pools; else a CUDA graph's private pool
  FreeSet free;            // free mapped blocks (the simulation's index only)
  // Unmapped expandable address space, by (stream, address); the room
  // find_expandable looks for is kept by the simulation only.
  UnmappedIndex unmapped;
  int64_t free_searches = 0;  // get_free_blocks_call_count, for garbage collection ages
  // Free blocks put or re-keyed since the last take_touched (the
  // simulation's index only): of the others, release_cached_blocks already
  // released or unmapped what it could, and nothing about them has changed.
  // `touched_all`: look at every free block (at first, and once more were
  // noted than the pool holds, so the list stays as small as the pool).
  std::vector<uint32_t> touched;
  bool touched_all = true;
};

// An expandable segment's reserved address space.
struct AddressSpace {
  int64_t base = 0, size = 0;
  uint16_t pool = 0, stream = 0;
  uint32_t head = kNone;  // its first block
};

class CachingAllocator {
 public:
  // index_free: keep the free blocks ordered for best-fit searches (the
  // simulation); index_starts: find blocks by their address (the replay).
  CachingAllocator(const Settings& s, bool index_free, bool index_starts);

  Settings settings;
  std::vector<Block> blocks;
  std::vector<Pool> pools;  // [0] large, [1] small, then private pools' large and small
  std::vector<AddressSpace> spaces;
  Counters now, peak;
  // Allocated bytes of blocks in no segment (add_detached, a segment the
  // replay released under them): counted in now.allocated, not in
  // now.reserved.
  int64_t detached_allocated = 0;
  int32_t peak_allocated_event = -1, peak_active_event = -1, peak_reserved_event = -1;
  int64_t peak_requested = 0;

  // The pool for a block of this kind in a private pool ((0, 0): the default).
  uint16_t pool_of(bool small, int64_t id0, int64_t id1);

  // A cudaMalloc'd segment, as one free block; returns it.
  uint32_t add_segment(int64_t addr, int64_t size, uint16_t pool, uint16_t stream);
  // cudaFree of a segment whose one block is free (release_block).
  void release_segment(uint32_t b);
  // An expandable segment's address space, unmapped; returns its index.
  uint16_t add_space(int64_t base, int64_t size, uint16_t pool, uint16_t stream);
  // Maps [addr, addr + size) of unmapped block u: a free block, merged with
  // free neighbours; returns it.
  uint32_t map(uint32_t u, int64_t addr, int64_t size);
  // Unmaps [addr, addr + size) of free block b; the rest stays free.
  void unmap(uint32_t b, int64_t addr, int64_t size);
  // The block of an expandable segment holding addr, or kNone.
  uint32_t space_block_at(int64_t addr) const;
  // The unmapped block holding addr in the pool's stream, or kNone.
  uint32_t unmapped_at(uint16_t pool, uint16_t stream, int64_t addr) const;
  // find_expandable_block (index_free): the first unmapped block of the
  // pool's stream, in address order, from which `size` bytes of free and
  // unmapped space run on unbroken (counted from its free predecessor, if
  // any); kNone if none.
  uint32_t first_unmapped_with_room(uint16_t pool, uint16_t stream, int64_t size);

  // Hands out `size` bytes of free block b (alloc_found_block), split off
  // when `split`; returns the allocated block. b is still a cached block
  // (in its pool's index, with index_free).
  uint32_t carve(uint32_t b, int64_t size, int64_t requested, bool split);
  // Splits free block b at addr; returns the upper part, free too.
  uint32_t split_free(uint32_t b, int64_t addr);
  // A block outside any segment (the replay's fallback); returns it.
  uint32_t add_detached(int64_t addr, int64_t size, int64_t requested, uint16_t stream);
  // free(): allocated bytes stop counting; the block waits for free_block.
  void free_requested(uint32_t b);
  // free_block(): merged with free neighbours and cached.
  void free_block(uint32_t b);
  // Forgets a block outside the segments' free lists (a lost placement).
  void drop(uint32_t b);

  // Block starting at addr (index_starts), or kNone.
  uint32_t starting_at(int64_t addr) {
    uint32_t* b = starts_.find(addr);
    return b ? *b : kNone;
  }
  // The free blocks of the pool put or re-keyed since the last call (every
  // one, the first time), in the index's order; starts the next list.
  std::vector<uint32_t> take_touched(uint16_t pool);
  // Takes free block b out of its pool's index (for a best-fit hit).
  void take_free(uint32_t b);
  void put_free(uint32_t b);
  // Records the peaks after trace entry `event`.
  void observe(int32_t event) {
    if (now.allocated > peak.allocated)
      peak.allocated = now.allocated, peak_allocated_event = event;
    if (now.active > peak.active) peak.active = now.active, peak_active_event = event;
    if (now.reserved > peak.reserved) peak.reserved = now.reserved, peak_reserved_event = event;
    peak_requested = std::max(peak_requested, now.requested);
  }
  FreeSpace free_space() const;
  bool indexes_free() const { return index_free_; }

 private:
  uint32_t new_block();
  uint32_t new_block(int64_t addr, int64_t size, uint16_t pool, uint16_t stream);
  void delete_block(uint32_t b);
  bool mergeable_into(uint32_t dst, uint32_t src) const;
  // Merges src into dst; `index`: also takes src out of its pool's index.
  bool merge(uint32_t dst, uint32_t src, bool index = true);
  // A free block's place in its pool's index.
  struct FreeKey {
    uint64_t hi = 0, lo = 0;
  };
  static FreeKey free_key(const Block& x) {
    return {FreeSet::hi_of(x.stream, x.size), static_cast<uint64_t>(x.addr)};
  }
  // Block b, free, had key `old` in its pool's index.
  void rekey(FreeKey old, uint32_t b);
  void set_start(uint32_t b) {
    if (index_starts_) starts_[blocks[b].addr] = b;
  }
  void clear_start(int64_t addr, uint32_t b) {
    if (index_starts_) starts_.erase(addr, b);
  }
  void put_unmapped(uint32_t b);
  void take_unmapped(uint32_t b);
  // Rooms (expandable_room.cpp): each unmapped block's room depends on the
  // run of free and unmapped blocks around it, so a block of an expandable
  // segment that changed is noted, and the runs through the noted ones are
  // measured again before the next search.
  bool allocatable(uint32_t b) const { return b != kNone && blocks[b].mergeable(); }
  void note_room(uint32_t b) {
    if (index_free_ && blocks[b].va) room_dirty_.push_back(b);
  }
  void refresh_rooms();
  void measure_run(uint32_t b);
  void touch(Pool& p, uint32_t b);

  bool index_free_, index_starts_;
  AddressMap<uint32_t> starts_;
  std::vector<uint32_t> free_slots_;
  std::vector<uint32_t> unmapped_node_;  // block -> its handle in its pool's unmapped index
  std::vector<uint32_t> room_dirty_;     // blocks noted by note_room
  std::vector<uint32_t> room_seen_;      // block -> the refresh that measured its run
  uint32_t room_pass_ = 0;
};

}  // namespace memsight::alloc
