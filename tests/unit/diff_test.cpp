// The replay's kept moments are its OOM states where both exist; a
// measured moment's sites add up to the replay's allocated bytes; the
// difference flamegraph colours growth and shrinkage apart.
#include "memsight/diff.h"

#include <gtest/gtest.h>

#include <numeric>

#include "allocator/replay.h"
#include "memsight/flamegraph.h"
#include "memsight/reader.h"
#include "test_data.h"

namespace memsight {
namespace {

TEST(Diff, KeptMomentsAreTheOomStates) {
  int ooms = 0;
  for (const std::string& name : test::fixture_names()) {
    Snapshot snap = read_snapshot_file(std::string(MEMSIGHT_TEST_DATA) + "/" + name + ".pickle");
    for (size_t d = 0; d < snap.device_count(); ++d) {
      const auto cfg = alloc::Settings::recorded(snap);
      replay::Result plain = replay::run(snap, d, cfg);
      std::vector<int64_t> at;
      for (const auto& o : plain.ooms) at.push_back(o.event);
      at.push_back(-1);
      replay::Result kept = replay::run(snap, d, cfg, at);
      ASSERT_EQ(kept.moments.size(), at.size()) << name;
      for (size_t i = 0; i < plain.ooms.size(); ++i, ++ooms) {
        const auto &a = plain.ooms[i], &b = kept.moments[i];
        EXPECT_EQ(b.event, a.event);
        EXPECT_EQ(b.at.allocated, a.at.allocated) << name;
        EXPECT_EQ(b.at.reserved, a.at.reserved) << name;
        EXPECT_EQ(b.free.bytes, a.free.bytes) << name;
        EXPECT_EQ(b.free.largest_large, a.free.largest_large) << name;
      }
      EXPECT_EQ(kept.moments.back().at.allocated, plain.start.allocated) << name;
      EXPECT_EQ(kept.moments.back().at.reserved, plain.start.reserved) << name;
    }
  }
  EXPECT_GE(ooms, 2);  // oom, oom_observer
}

TEST(Diff, SitesAddUpToAllocatedAtEveryMoment) {
  for (const std::string& name : test::fixture_names()) {
    Snapshot snap = read_snapshot_file(std::string(MEMSIGHT_TEST_DATA) + "/" + name + ".pickle");
    size_t d = default_device(snap).first;
    for (const DiffMoment& m : measure_moments(snap, name, d, {"-1", "peak", "snapshot"})) {
      int64_t sites = 0, count = 0;
      for (const SiteAmount& s : m.sites) {
        sites += s.bytes;
        count += s.count;
      }
      EXPECT_EQ(sites, m.allocated) << name << " at " << m.at;
      EXPECT_EQ(m.categories.total(), m.allocated) << name << " at " << m.at;
      int64_t folded = 0;
      for (const auto& [stack, bytes] : m.folded) folded += bytes;
      EXPECT_EQ(folded, m.allocated) << name << " at " << m.at;
      EXPECT_GE(m.reserved, m.active) << name << " at " << m.at;
    }
  }
}

TEST(Diff, FlamegraphColoursGrowthRedAndShrinkageBlue) {
  FlamegraphOptions opts;
  opts.difference = true;
  std::string svg = render_flamegraph_svg("grew;a.py:1:f 100\nshrank;b.py:2:g 50\n", opts);
  EXPECT_NE(svg.find("fill=\"rgb(215,60,60)\"/><text x=\"13.00\" y=\"82.5\">grew"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("rgb(60,100,215)"), std::string::npos);
  opts.difference = false;
  std::string plain = render_flamegraph_svg("grew;a.py:1:f 100\nshrank;b.py:2:g 50\n", opts);
  EXPECT_EQ(plain.find("rgb(215,60,60)"), std::string::npos);
}

}  // namespace
}  // namespace memsight
