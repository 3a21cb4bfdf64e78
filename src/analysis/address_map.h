#pragma once
// An address-keyed table for the allocator replay, flat and open-addressed:
// the replay does a lookup per trace entry, where node-based containers were
// the summary's largest cost. A key and its value share a slot (one cache
// line per probe). Erase leaves a tombstone, which an insert reuses.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsight {

template <typename V>
class AddressMap {
 public:
  AddressMap() : slots_(1024) {}
  V* find(int64_t a) {
    Slot* s = slot(a);
    return s ? &s->val : nullptr;
  }
  // The value at a, made (V{}) when a has none: one probe either way.
  V& operator[](int64_t a) {
    for (;;) {
      size_t mask = slots_.size() - 1, free = SIZE_MAX, i = hash(a) & mask;
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
  // Neither is a valid address.
  static constexpr int64_t kEmpty = INT64_MIN, kTomb = INT64_MIN + 1;
  struct Slot {
    int64_t key = kEmpty;
    V val{};
  };
  Slot* slot(int64_t a) {
    size_t mask = slots_.size() - 1;
    for (size_t i = hash(a) & mask;; i = (i + 1) & mask) {
      if (slots_[i].key == a) return &slots_[i];
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  void erase(Slot& s) {
    s.key = kTomb;
    --size_;
  }
  // Addresses are multiples of 512: mix every bit down (splitmix64's finaliser).
  static size_t hash(int64_t a) {
    auto x = static_cast<uint64_t>(a);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return static_cast<size_t>(x ^ (x >> 33));
  }
  void rehash(size_t cap) {
    std::vector<Slot> slots(cap);
    size_t mask = cap - 1;
    for (const Slot& s : slots_) {
      if (s.key == kEmpty || s.key == kTomb) continue;
      size_t i = hash(s.key) & mask;
      while (slots[i].key != kEmpty) i = (i + 1) & mask;
      slots[i] = s;
    }
    slots_.swap(slots);
    used_ = size_;
  }
  std::vector<Slot> slots_;
  size_t size_ = 0, used_ = 0;  // live keys; live keys + tombstones
};

}  // namespace memsight
