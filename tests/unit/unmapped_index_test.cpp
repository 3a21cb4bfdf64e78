// The unmapped ranges' index (unmapped_index.h) against a sorted list
// searched one entry at a time, as find_expandable did before it: random
// inserts (equal addresses included), erases and rooms.
#include "allocator/unmapped_index.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace memsight::alloc {
namespace {

struct Ref {
  uint32_t stream;
  int64_t addr, room;
  uint32_t id, handle;
};

TEST(UnmappedIndex, AgreesWithAScanInAddressOrder) {
  std::mt19937_64 rng(7);
  UnmappedIndex ix;
  std::vector<Ref> ref;  // (stream, addr) order, the newest first among equals
  for (uint32_t step = 0; step < 20000; ++step) {
    int op = static_cast<int>(rng() % 4);
    if (op == 0 || ref.empty()) {
      Ref r{static_cast<uint32_t>(rng() % 3), static_cast<int64_t>(rng() % 500) * 4096, -1, step,
            0};
      r.handle = ix.insert(r.stream, r.addr, r.id);
      auto at = ref.begin();
      while (at != ref.end() &&
             (at->stream < r.stream || (at->stream == r.stream && at->addr < r.addr)))
        ++at;
      ref.insert(at, r);
    } else if (op == 1) {
      size_t i = rng() % ref.size();
      ix.erase(ref[i].handle);
      ref.erase(ref.begin() + static_cast<long>(i));
    } else if (op == 2) {
      Ref& r = ref[rng() % ref.size()];
      r.room = static_cast<int64_t>(rng() % 1000) - 1;
      ix.set_room(r.handle, r.room);
    } else {
      uint32_t stream = static_cast<uint32_t>(rng() % 4);
      int64_t size = static_cast<int64_t>(rng() % 1000);
      uint32_t want = UnmappedIndex::kNil;
      for (const Ref& r : ref)
        if (r.stream == stream && r.room >= size) {
          want = r.id;
          break;
        }
      ASSERT_EQ(ix.first_with_room(stream, size), want);
      std::vector<uint32_t> in_stream, seen;
      for (const Ref& r : ref)
        if (r.stream == stream) in_stream.push_back(r.id);
      ix.find_in_stream(stream, [&](int64_t, uint32_t id) {
        seen.push_back(id);
        return false;
      });
      ASSERT_EQ(seen, in_stream);
    }
  }
}

}  // namespace
}  // namespace memsight::alloc
