// find_expandable_block's search through the unmapped ranges' rooms
// (CachingAllocator::first_unmapped_with_room) against the scan it
// replaced: every unmapped block of the stream in address order, the run
// of free and unmapped blocks from it (or its free predecessor) added up.
// Random maps, carves, frees and unmaps over a few expandable segments make
// runs of several unmapped ranges, where the first range is not the answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "allocator/caching_allocator.h"

namespace memsight::alloc {
namespace {

uint32_t scan(const CachingAllocator& a, uint16_t stream, int64_t size) {
  std::vector<uint32_t> unmapped;
  for (const AddressSpace& sp : a.spaces)
    for (uint32_t b = sp.head; b != kNone; b = a.blocks[b].next)
      if (!a.blocks[b].mapped && sp.stream == stream) unmapped.push_back(b);
  std::sort(unmapped.begin(), unmapped.end(),
            [&](uint32_t l, uint32_t r) { return a.blocks[l].addr < a.blocks[r].addr; });
  auto allocatable = [&](uint32_t b) { return b != kNone && a.blocks[b].mergeable(); };
  for (uint32_t u : unmapped) {
    uint32_t c = allocatable(a.blocks[u].prev) ? a.blocks[u].prev : u;
    int64_t room = 0;
    for (uint32_t b = c; allocatable(b); b = a.blocks[b].next) room += a.blocks[b].size;
    if (room >= size) return u;
  }
  return kNone;
}

TEST(ExpandableRoom, AgreesWithAScanOfEveryUnmappedRange) {
  const int64_t page = page_size(false);
  CachingAllocator a(Settings{}, /*index_free=*/true, /*index_starts=*/false);
  for (uint16_t i = 0; i < 4; ++i) a.add_space(int64_t{i} * 64 * page, 32 * page, 0, i % 2);
  std::mt19937_64 rng(3);
  auto pick = [&](auto want) {
    std::vector<uint32_t> v;
    for (const AddressSpace& sp : a.spaces)
      for (uint32_t b = sp.head; b != kNone; b = a.blocks[b].next)
        if (want(a.blocks[b])) v.push_back(b);
    return v.empty() ? kNone : v[rng() % v.size()];
  };
  for (int step = 0; step < 4000; ++step) {
    int op = static_cast<int>(rng() % 4);
    if (op == 0) {  // pages for the start of an unmapped range
      uint32_t u = pick([](const Block& x) { return !x.mapped; });
      if (u == kNone) continue;
      int64_t pages =
          std::min<int64_t>(1 + static_cast<int64_t>(rng() % 3), a.blocks[u].size / page);
      a.map(u, a.blocks[u].addr, pages * page);
    } else if (op == 1) {  // an allocation from a free block
      uint32_t b = pick([](const Block& x) { return x.mapped && x.mergeable(); });
      if (b == kNone) continue;
      int64_t size = rng() % 4 == 0
                         ? a.blocks[b].size
                         : std::min<int64_t>(a.blocks[b].size,
                                             512 * (1 + static_cast<int64_t>(rng() % 60000)));
      a.carve(b, size, size, size < a.blocks[b].size);
    } else if (op == 2) {
      uint32_t b = pick([](const Block& x) { return x.allocated; });
      if (b != kNone) a.free_block(b);
    } else {  // empty_cache: the whole pages of a free block
      uint32_t b = pick([](const Block& x) { return x.mapped && x.mergeable(); });
      if (b == kNone) continue;
      const Block& x = a.blocks[b];
      const int64_t base = a.spaces[x.va - 1].base;
      int64_t first = (x.addr - base + page - 1) / page, last = (x.addr + x.size - base) / page;
      if (first < last) a.unmap(b, base + first * page, (last - first) * page);
    }
    for (uint16_t stream : {0, 1})
      for (int k = 0; k < 6; ++k) {
        const int64_t size = 512 * (1 + static_cast<int64_t>(rng() % (page / 512 * 40)));
        ASSERT_EQ(a.first_unmapped_with_room(0, stream, size), scan(a, stream, size))
            << "step " << step << " stream " << stream << " size " << size;
      }
  }
}

}  // namespace
}  // namespace memsight::alloc
