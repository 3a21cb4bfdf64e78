#pragma once
// The iteration order CPython (3.8+, 64-bit) gives `set(a) - set(b)` for
// sets of (int, int) tuples built by a set comprehension: torch's `compare`
// prints such a set, so matching its output means matching the hash table.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memsight {

// Elements of set(a) - set(b) in CPython's iteration order.
std::vector<std::pair<int64_t, int64_t>> pyset_difference_order(
    const std::vector<std::pair<int64_t, int64_t>>& a,
    const std::vector<std::pair<int64_t, int64_t>>& b);

}  // namespace memsight
