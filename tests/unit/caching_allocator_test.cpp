// What release_cached_blocks looks at (CachingAllocator::take_touched): the
// free blocks changed since it last looked, not every cached block. A walk
// over every one made n empty_cache calls among n fragments cost n^2
// (issue 34, the `released` axis of whatif).
#include "allocator/caching_allocator.h"

#include <gtest/gtest.h>

#include <vector>

namespace memsight::alloc {
namespace {

TEST(CachingAllocator, ReleaseLooksOnlyAtBlocksChangedSinceItLast) {
  CachingAllocator a(Settings{}, /*index_free=*/true, /*index_starts=*/false);
  constexpr int kSegments = 100;
  constexpr int64_t kSize = 4 << 20;
  std::vector<uint32_t> held;
  for (int i = 0; i < kSegments; ++i) {
    const uint32_t b = a.add_segment(int64_t{i} * 2 * kSize, kSize, 0, 0);
    held.push_back(a.carve(b, kSize / 2, kSize / 2, true));  // a split segment stays
  }
  // The first time, every free block, in the index's order.
  std::vector<uint32_t> all;
  a.pools[0].free.for_each([&](const FreeSet::Entry& e) { all.push_back(e.id); });
  EXPECT_EQ(all.size(), static_cast<size_t>(kSegments));
  EXPECT_EQ(a.take_touched(0), all);
  // Nothing changed: nothing to look at.
  EXPECT_TRUE(a.take_touched(0).empty());
  // One block freed merges with its free half: that block alone.
  a.free_block(held[7]);
  const std::vector<uint32_t> one = a.take_touched(0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(a.blocks[one[0]].addr, 7 * 2 * kSize);
  EXPECT_EQ(a.blocks[one[0]].size, kSize);
  EXPECT_TRUE(a.take_touched(0).empty());
}

}  // namespace
}  // namespace memsight::alloc
