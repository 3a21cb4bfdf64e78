// Where the simulation puts segments the recording does not have: the
// driver's placements, as the whatif workloads recorded them on an H100.
#include "allocator/segment_addresses.h"

#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace memsight::alloc {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kTop = int64_t{0x7F0000000000};

struct Seg {
  int64_t at, size;  // MiB from kTop
};

// Places each segment after the first, which is where the recording put it.
std::vector<int64_t> place_after(SegmentAddresses& a, const std::vector<Seg>& segs) {
  std::vector<int64_t> got;
  for (size_t i = 1; i < segs.size(); ++i)
    got.push_back((a.place(segs[i].size * kMiB) - kTop) / kMiB);
  return got;
}

std::vector<int64_t> wanted(const std::vector<Seg>& segs) {
  std::vector<int64_t> out;
  for (size_t i = 1; i < segs.size(); ++i) out.push_back(segs[i].at);
  return out;
}

// varlen under roundup_power2_divisions:4: new ranges of the size rounded
// to 32 MiB, each below the others; smaller segments in the best-fitting
// free end of one (the lowest on ties).
TEST(SegmentAddresses, ReservesTopDownAndFillsTheBestFittingEnd) {
  const std::vector<Seg> segs = {
      {-1628, 40}, {-1692, 40}, {-1652, 24}, {-1756, 40}, {-1820, 40}, {-1780, 24}, {-1716, 20},
      {-1588, 20}, {-1884, 40}, {-1948, 40}, {-1908, 24}, {-1844, 20}, {-1980, 20}, {-2044, 40},
      {-2108, 40}, {-2068, 24}, {-2004, 20}, {-2140, 20}, {-2172, 24}, {-2120, 12}, {-2236, 48},
      {-2300, 40}, {-2364, 40}, {-2428, 56}, {-2492, 56}, {-2556, 56}};
  SegmentAddresses a(kTop + segs[0].at * kMiB);
  a.taken(kTop + segs[0].at * kMiB, segs[0].size * kMiB);
  EXPECT_EQ(place_after(a, segs), wanted(segs));
}

// churn: the ranges of freed segments are reserved again, from the top.
TEST(SegmentAddresses, ReusesReleasedRangesFromTheTop) {
  const std::vector<Seg> segs = {{-576, 54}, {-672, 82}, {-736, 40},  {-832, 68},
                                 {-764, 26}, {-928, 84}, {-1024, 86}, {-1120, 88}};
  SegmentAddresses a(kTop + segs[0].at * kMiB);
  a.taken(kTop + segs[0].at * kMiB, segs[0].size * kMiB);
  EXPECT_EQ(place_after(a, segs), wanted(segs));
  for (const Seg& s : {Seg{-764, 26}, Seg{-928, 84}, Seg{-1024, 86}, Seg{-1120, 88}})
    a.release(kTop + s.at * kMiB, s.size * kMiB);
  EXPECT_EQ((a.place(90 * kMiB) - kTop) / kMiB, -928);
  EXPECT_EQ((a.place(92 * kMiB) - kTop) / kMiB, -1024);
  // The freed 26 MiB made its range's free end 28 MiB again.
  EXPECT_EQ((a.place(26 * kMiB) - kTop) / kMiB, -764);
}

// The released ranges against a plain map scanned from the top (what
// place() did before the index): the same ranges and the same answers
// through a random history of releases, takes and lookups.
TEST(ReleasedRanges, AgreesWithAScanFromTheTop) {
  ReleasedRanges r;
  std::map<int64_t, int64_t> plain;
  uint64_t x = 88172645463325252ull;
  auto next = [&](int64_t n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<int64_t>(x % static_cast<uint64_t>(n));
  };
  for (int step = 0; step < 20000; ++step) {
    const int64_t start = next(4000), end = start + 1 + next(40);
    if (next(3) != 0) {  // release [start, end) where nothing is released
      auto it = plain.lower_bound(start);
      bool free = (it == plain.end() || it->first >= end) &&
                  (it == plain.begin() || std::prev(it)->second <= start);
      if (!free) continue;
      r.release(start, end);
      plain[start] = end;
      if (auto n = plain.find(end); n != plain.end()) {
        plain[start] = n->second;
        plain.erase(n);
      }
      if (auto p = plain.find(start); p != plain.begin() && std::prev(p)->second == start) {
        std::prev(p)->second = p->second;
        plain.erase(p);
      }
    } else {
      r.take(start, end);
      std::map<int64_t, int64_t> kept;
      for (auto [s, e] : plain) {
        if (e <= start || s >= end) kept[s] = e;
        if (s < start && e > start) kept[s] = start;
        if (s < end && e > end) kept[end] = e;
      }
      plain.swap(kept);
    }
    ASSERT_EQ(r.ranges(), plain) << "step " << step;
    const int64_t length = 1 + next(60);
    std::optional<std::pair<int64_t, int64_t>> want;
    for (auto it = plain.rbegin(); it != plain.rend(); ++it)
      if (it->second - it->first >= length) {
        want = *it;
        break;
      }
    ASSERT_EQ(r.highest_holding(length), want) << "step " << step;
  }
}

}  // namespace
}  // namespace memsight::alloc
