// Where the simulation puts segments the recording does not have: the
// driver's placements, as the whatif workloads recorded them on an H100.
#include "allocator/segment_addresses.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace memsight::alloc
