#pragma once
// A hash of a whole report, for AlikeDevices::add: reports equal under
// operator== hash alike, and reports that differ anywhere almost never do.
// A hash of a few fields let thousands of devices that differ elsewhere
// (each its own allocation site, or its own stack of one site) share one
// hash, and each new device was compared with every group: devices^2.
//
// A report type lists its fields once, in a `fold_fields(ValueHash&, const
// T&)` beside it (found by argument-dependent lookup); a field left out only
// makes more comparisons, never a wrong group.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "analysis/alike/alike.h"

namespace memsight {

class ValueHash {
 public:
  uint64_t value() const { return h_; }

  template <class T>
  ValueHash& operator()(const T& v) {
    if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
      h_ = hash_mix(h_, static_cast<uint64_t>(v));
    } else if constexpr (std::is_same_v<T, double>) {
      // 0.0 == -0.0: both hash as 0. (memcpy: the WebAssembly build's
      // standard library has no std::bit_cast.)
      uint64_t bits = 0;
      if (v != 0) std::memcpy(&bits, &v, sizeof bits);
      h_ = hash_mix(h_, bits);
    } else if constexpr (std::is_same_v<T, std::string>) {
      h_ = hash_mix(h_, std::hash<std::string_view>{}(v));
    } else {
      fold_fields(*this, v);
    }
    return *this;
  }
  template <class T>
  ValueHash& operator()(const std::vector<T>& v) {
    (*this)(v.size());
    for (const T& x : v) (*this)(x);
    return *this;
  }
  template <class T, size_t N>
  ValueHash& operator()(const std::array<T, N>& v) {
    for (const T& x : v) (*this)(x);
    return *this;
  }
  template <class T>
  ValueHash& operator()(const std::optional<T>& v) {
    (*this)(v.has_value());
    if (v) (*this)(*v);
    return *this;
  }

 private:
  uint64_t h_ = 0;
};

}  // namespace memsight
