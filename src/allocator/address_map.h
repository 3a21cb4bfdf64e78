#pragma once
// An address-keyed table for the allocator replay, flat and open-addressed:
// the replay does a lookup per trace entry, where node-based containers were
// the summary's largest cost. A key and its value share a slot (one cache
// line per probe). Erase leaves a tombstone, which an insert reuses.
#include <bit>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsight {

template <typename V>
class AddressMap {
 public:
  AddressMap() : slots_(kFirstSlots) {}
  V* find(int64_t a) {
    Slot* s = slot(a);
    return s ? &s->val : nullptr;
  }
  // The value at a, made (V{}) when a has none: one probe either way.
  V& operator[](int64_t a) {
    for (;;) {
      size_t mask = slots_.size() - 1, free = SIZE_MAX, i = index(a);
      for (;; i = (i + 1) & mask) {
        if (slots_[i].key == a) return slots_[i].val;
        if (slots_[i].key == kEmpty) break;
        if (slots_[i].key == kTomb && free == SIZE_MAX) free = i;
      }
      if (free == SIZE_MAX) {  // a fresh slot: keep at least half of them empty
        if ((used_ + 1) * 2 > slots_.size()) {
          rehash(size_ * 4 > slots_.size() ? slots_.size() * 2 : slots_.size());
          continue;
        }
        free = i;
        ++used_;
      }
      ++size_;
      slots_[free] = {a, V{}};
      return slots_[free].val;
    }
  }
  void erase(int64_t a) {
    if (Slot* s = slot(a)) erase(*s);
  }
  // Erases a only where its value is v.
  void erase(int64_t a, const V& v) {
    if (Slot* s = slot(a); s && s->val == v) erase(*s);
  }

 private:
  static constexpr size_t kFirstSlots = 1024;
  // Neither is a valid address.
  static constexpr int64_t kEmpty = INT64_MIN, kTomb = INT64_MIN + 1;
  struct Slot {
    int64_t key = kEmpty;
    V val{};
  };
  Slot* slot(int64_t a) {
    size_t mask = slots_.size() - 1;
    for (size_t i = index(a);; i = (i + 1) & mask) {
      if (slots_[i].key == a) return &slots_[i];
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  void erase(Slot& s) {
    s.key = kTomb;
    --size_;
  }
  // Addresses are multiples of 512: the top bits of their product with
  // 2^64 / golden ratio (Fibonacci hashing) spread them in one multiply, on
  // the replay's critical path.
  size_t index(int64_t a) const {
    return static_cast<size_t>((static_cast<uint64_t>(a) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void rehash(size_t cap) {
    std::vector<Slot> slots(cap);
    slots_.swap(slots);
    shift_ = 64 - std::countr_zero(cap);
    size_t mask = cap - 1;
    for (const Slot& s : slots) {
      if (s.key == kEmpty || s.key == kTomb) continue;
      size_t i = index(s.key);
      while (slots_[i].key != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
    used_ = size_;
  }
  std::vector<Slot> slots_;
  int shift_ = 64 - std::countr_zero(kFirstSlots);  // 64 - log2(slots)
  size_t size_ = 0, used_ = 0;                      // live keys; live keys + tombstones
};

}  // namespace memsight
