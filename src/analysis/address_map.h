#pragma once
// An address-keyed table for the allocator replay, flat and open-addressed:
// the replay does a lookup per trace entry, where node-based containers were
// the summary's largest cost. Erase leaves a tombstone.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memsight {

template <typename V>
class AddressMap {
 public:
  AddressMap() : keys_(1024, kEmpty), vals_(1024) {}
  V* find(int64_t a) {
    size_t mask = keys_.size() - 1;
    for (size_t i = hash(a) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == a) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  V& operator[](int64_t a) {
    if (V* v = find(a)) return *v;
    if ((used_ + 1) * 2 > keys_.size())
      rehash(size_ * 4 > keys_.size() ? keys_.size() * 2 : keys_.size());
    size_t mask = keys_.size() - 1, i = hash(a) & mask;
    while (keys_[i] != kEmpty && keys_[i] != kTomb) i = (i + 1) & mask;
    if (keys_[i] == kEmpty) ++used_;
    keys_[i] = a;
    vals_[i] = V{};
    ++size_;
    return vals_[i];
  }
  void erase(int64_t a) {
    size_t mask = keys_.size() - 1;
    for (size_t i = hash(a) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == a) {
        keys_[i] = kTomb;
        --size_;
        return;
      }
      if (keys_[i] == kEmpty) return;
    }
  }
  template <typename F>
  void for_each(F&& f) {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmpty && keys_[i] != kTomb) f(keys_[i], vals_[i]);
  }

 private:
  // Neither is a valid address.
  static constexpr int64_t kEmpty = INT64_MIN, kTomb = INT64_MIN + 1;
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
    std::vector<int64_t> keys(cap, kEmpty);
    std::vector<V> vals(cap);
    size_t mask = cap - 1;
    for (size_t j = 0; j < keys_.size(); ++j) {
      if (keys_[j] == kEmpty || keys_[j] == kTomb) continue;
      size_t i = hash(keys_[j]) & mask;
      while (keys[i] != kEmpty) i = (i + 1) & mask;
      keys[i] = keys_[j];
      vals[i] = vals_[j];
    }
    keys_.swap(keys);
    vals_.swap(vals);
    used_ = size_;
  }
  std::vector<int64_t> keys_;
  std::vector<V> vals_;
  size_t size_ = 0, used_ = 0;  // live keys; live keys + tombstones
};

}  // namespace memsight
