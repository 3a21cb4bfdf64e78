// The model's interning tables (src/model/tables.cpp): each value gets one
// id, in the order first seen, and a lookup costs the same however many
// values came before (issue 34: the key layouts were looked up one by one).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memsight/id_slots.h"
#include "memsight/snapshot.h"

using namespace memsight;

namespace {

// Layout i: keys 100 + the bits of i, then field Extra; all distinct.
std::vector<ShapeKey> layout(uint32_t i) {
  std::vector<ShapeKey> keys;
  for (uint32_t b = 0; b < 17; ++b)
    if (i >> b & 1) keys.push_back({100 + b, Field::Extra});
  keys.push_back({1, Field::Extra});
  return keys;
}

}  // namespace

TEST(Interning, EveryLayoutInTurnIsALookup) {
  // 60,000 layouts, then all of them again 20 times, never two alike in a
  // row: 1.2 million lookups. One by one that was 3.6 * 10^10 comparisons
  // (past a minute); indexed, a fraction of a second.
  constexpr uint32_t kLayouts = 60'000;
  ShapeTable table;
  for (uint32_t i = 0; i < kLayouts; ++i) ASSERT_EQ(table.intern(layout(i)), i);
  for (int round = 0; round < 20; ++round)
    for (uint32_t i = 0; i < kLayouts; ++i) ASSERT_EQ(table.intern(layout(i)), i);
  EXPECT_EQ(table.size(), kLayouts);
  auto keys = table.get(5);  // bits 0 and 2
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].key, 100u);
  EXPECT_EQ(keys[1].key, 102u);
}

TEST(Interning, TheLayoutLimitStands) {
  ShapeTable table;
  for (uint32_t i = 0; i < 65'535; ++i) table.intern(layout(i));
  EXPECT_EQ(table.intern(layout(17)), 17);
  EXPECT_THROW(table.intern(layout(65'535)), std::length_error);
}

TEST(Interning, StringsFramesAndStacksKeepTheirFirstIds) {
  Snapshot snap;
  EXPECT_EQ(snap.strings.intern(""), 0u);
  std::vector<StrId> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back(snap.strings.intern("s" + std::to_string(i)));
  for (int i = 0; i < 5000; ++i) {
    EXPECT_EQ(snap.strings.intern("s" + std::to_string(i)), ids[i]);
    EXPECT_EQ(snap.str(ids[i]), "s" + std::to_string(i));
  }
  FrameTable frames;
  std::vector<FrameId> f;
  for (uint32_t i = 0; i < 5000; ++i) f.push_back(frames.intern_frame({i, i + 1, i % 7, 0}));
  EXPECT_EQ(frames.intern_frame({3, 4, 3, 0}), f[3]);
  EXPECT_NE(frames.intern_frame({3, 4, 3, 1}), f[3]);  // extra differs
  EXPECT_EQ(frames.stack_count(), 1u);                 // the empty stack
  StackId a = frames.intern_stack(std::vector<FrameId>{f[1], f[2]});
  StackId b = frames.intern_stack(std::vector<FrameId>{f[2], f[1]});
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(frames.intern_stack(std::vector<FrameId>{f[1], f[2]}), a);
  EXPECT_EQ(frames.intern_stack({}), 0u);
}

TEST(Interning, EqualHashesAreToldApartByTheValues) {
  IdSlots slots;
  std::vector<int> values;
  for (int i = 0; i < 1000; ++i) {
    values.push_back(i);
    slots.add(static_cast<uint32_t>(i), 42);  // one hash for all
  }
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(slots.find(42, [&](uint32_t id) { return values[id] == i; }), uint32_t(i));
  EXPECT_EQ(slots.find(42, [&](uint32_t) { return false; }), IdSlots::kNone);
  EXPECT_EQ(slots.find(7, [&](uint32_t) { return true; }), IdSlots::kNone);
}

TEST(Interning, TopLevelKeysAreALookup) {
  // 100,000 top-level keys, each asked for: a scan each was 5 * 10^9 string
  // comparisons (the work of many devices asking for a few keys each).
  Snapshot snap;
  constexpr int kKeys = 100'000;
  for (int i = 0; i < kKeys; ++i) snap.top_level.emplace_back("k" + std::to_string(i), PyValue());
  for (int i = 0; i < kKeys; ++i)
    ASSERT_EQ(snap.top("k" + std::to_string(i)), &snap.top_level[i].second);
  EXPECT_EQ(snap.top("absent"), nullptr);
  // A key added after the first lookup is found; a repeated key gives its
  // first value.
  snap.top_level.emplace_back("late", PyValue());
  snap.top_level.emplace_back("k7", PyValue());
  EXPECT_EQ(snap.top("late"), &snap.top_level[kKeys].second);
  EXPECT_EQ(snap.top("k7"), &snap.top_level[7].second);
  Snapshot few;
  few.top_level.emplace_back("a", PyValue());
  few.top_level.emplace_back("a", PyValue());
  EXPECT_EQ(few.top("a"), &few.top_level[0].second);
}
