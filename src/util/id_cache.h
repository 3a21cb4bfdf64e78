#pragma once
// A value per id of one of the snapshot's tables (stacks, strings), made on
// first use, for a pass over one device: a vector over the whole table when
// the table is no larger than the device's own work, else a hash map of the
// ids the pass meets. A vector on every device cost devices times the
// table's size (10,000 devices and a million stacks: 10^10 bytes cleared).
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace memsight {

template <class V>
class IdCache {
 public:
  IdCache() = default;
  // `ids`: the table's size; `work`: what the pass does anyway (the
  // device's trace entries); `empty`: a slot's value before its first use.
  IdCache(size_t ids, size_t work, V empty) : dense_(ids <= work), empty_(empty) {
    if (dense_) vec_.assign(ids, empty);
  }

  V& operator[](uint32_t id) {
    return dense_ ? vec_[id] : map_.try_emplace(id, empty_).first->second;
  }

 private:
  bool dense_ = true;
  V empty_{};
  std::vector<V> vec_;
  std::unordered_map<uint32_t, V> map_;
};

}  // namespace memsight
