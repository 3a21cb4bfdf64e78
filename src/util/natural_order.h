#pragma once
// Names in the order a person expects: numbered parts compare as numbers
// ("layers.2" before "layers.10", "rank2" before "rank10").
#include <string_view>

namespace memsight {

inline bool natural_less(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && digit(a[i2])) ++i2;
      while (j2 < b.size() && digit(b[j2])) ++j2;
      if (i2 - i != j2 - j) return i2 - i < j2 - j;
      if (int c = a.substr(i, i2 - i).compare(b.substr(j, j2 - j)); c) return c < 0;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace memsight
