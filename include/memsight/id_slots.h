#pragma once
// The index of an interning table whose values live elsewhere, in a vector
// by id: open addressing over the ids, each slot an id + 1 (0: empty), with
// each id's hash kept by id so that growing never reads the values again.
// A lookup reads a slot and a hash, then compares only the candidates whose
// hash is equal. A node-based hash map costs an allocation a value and two
// or three cache misses a lookup; with a few hundred thousand strings or
// frames those misses were most of reading a snapshot (issue 34, the
// `stacks` axis of bench/complexity_bench.py).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsight {

class IdSlots {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The id of hash `h` for which `same(id)` holds, or kNone.
  template <class Same>
  uint32_t find(uint64_t h, Same&& same) const {
    if (slots_.empty()) return kNone;
    size_t mask = slots_.size() - 1;
    for (size_t i = mix(h) & mask;; i = (i + 1) & mask) {
      uint32_t slot = slots_[i];
      if (slot == 0) return kNone;
      if (hashes_[slot - 1] == h && same(slot - 1)) return slot - 1;
    }
  }

  // Indexes `id` (not indexed yet) under hash `h`. Ids need not be dense:
  // a table may leave some out (the empty stack).
  void add(uint32_t id, uint64_t h) {
    if (id >= hashes_.size()) hashes_.resize(size_t{id} + 1, 0);
    hashes_[id] = h;
    if ((count_ + 1) * 2 > slots_.size()) grow();
    place(slots_, id);
    ++count_;
  }

  void clear() {
    slots_.clear();
    hashes_.clear();
    count_ = 0;
  }

 private:
  // The low bits choose the slot: spread every bit of the hash into them
  // (a hash made of products keeps its low bits poor).
  static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
  }

  void place(std::vector<uint32_t>& slots, uint32_t id) const {
    size_t mask = slots.size() - 1;
    size_t i = mix(hashes_[id]) & mask;
    while (slots[i]) i = (i + 1) & mask;
    slots[i] = id + 1;
  }

  void grow() {
    std::vector<uint32_t> bigger(slots_.empty() ? 64 : slots_.size() * 2, 0);
    for (uint32_t slot : slots_)
      if (slot) place(bigger, slot - 1);
    slots_.swap(bigger);
  }

  std::vector<uint32_t> slots_;   // a power of two, at most half full
  std::vector<uint64_t> hashes_;  // by id
  size_t count_ = 0;
};

}  // namespace memsight
