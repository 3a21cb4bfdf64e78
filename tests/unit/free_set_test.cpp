// The allocator's ordered free blocks (free_set.h) against std::set, on
// random inserts, erases, rekeys and lower bounds, across chunk splits; the
// largest block against the largest size in the set.
#include "allocator/free_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace memsight::alloc {
namespace {

using Key = std::tuple<uint64_t, uint64_t, uint32_t>;

std::vector<Key> contents(const FreeSet& f) {
  std::vector<Key> v;
  f.for_each([&](const FreeSet::Entry& e) { v.emplace_back(e.hi, e.lo, e.id); });
  return v;
}

TEST(FreeSet, AgreesWithAnOrderedSet) {
  for (int keys : {40, 3000}) {  // at most 480 entries (one chunk); many chunks
    std::mt19937_64 rng(keys);
    const uint64_t sizes = keys == 40 ? 4 : 64;
    FreeSet f;
    std::set<Key> ref;
    auto random_key = [&] {
      return std::make_pair(
          FreeSet::hi_of(static_cast<uint32_t>(rng() % 3), 512 * (1 + rng() % sizes)),
          uint64_t{4096} * (rng() % static_cast<uint64_t>(keys)));
    };
    for (int step = 0; step < 20000; ++step) {
      auto [hi, lo] = random_key();
      auto it = ref.lower_bound({hi, lo, 0});
      bool present = it != ref.end() && std::get<0>(*it) == hi && std::get<1>(*it) == lo;
      int op = static_cast<int>(rng() % 4);
      if (op == 0 && !present) {
        f.insert(hi, lo, step);
        ref.insert({hi, lo, step});
      } else if (op == 1) {
        EXPECT_EQ(f.erase(hi, lo), present);
        if (present) ref.erase(it);
      } else if (op == 2 && !ref.empty()) {
        auto victim = std::next(ref.begin(), static_cast<long>(rng() % ref.size()));
        auto [nhi, nlo] = random_key();
        auto clash = ref.lower_bound({nhi, nlo, 0});
        if (clash != ref.end() && std::get<0>(*clash) == nhi && std::get<1>(*clash) == nlo)
          continue;
        f.rekey(std::get<0>(*victim), std::get<1>(*victim), nhi, nlo, step);
        ref.erase(victim);
        ref.insert({nhi, nlo, step});
      } else {
        FreeSet::Pos p = f.lower_bound(hi, lo);
        ASSERT_EQ(f.at_end(p), it == ref.end());
        if (it != ref.end()) {
          EXPECT_EQ(f.at(p).id, std::get<2>(*it));
          if (it != ref.begin()) {
            EXPECT_EQ(f.at(f.prev(p)).id, std::get<2>(*std::prev(it)));
          }
          if (std::next(it) != ref.end()) {
            EXPECT_EQ(f.at(f.next(p)).id, std::get<2>(*std::next(it)));
          }
        }
      }
      ASSERT_EQ(f.size(), ref.size());
      uint64_t largest = 0;
      for (const Key& k : ref)
        largest = std::max(largest, std::get<0>(k) & ((uint64_t{1} << 48) - 1));
      ASSERT_EQ(f.largest(), static_cast<int64_t>(largest));
    }
    EXPECT_EQ(contents(f), std::vector<Key>(ref.begin(), ref.end()));
  }
}

}  // namespace
}  // namespace memsight::alloc
