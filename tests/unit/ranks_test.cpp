// merge_ranks() on hand-made rank summaries: medians, the typical rank, the
// ranks that differ and by what, OOM verdicts, numbering, duplicates and
// mismatches; summarize_rank() on a real snapshot.
#include "memsight/ranks.h"

#include <gtest/gtest.h>

#include <string>

#include "memsight/error.h"
#include "memsight/reader.h"
#include "memsight/summary.h"
#include "test_data.h"

namespace memsight {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;
constexpr size_t kAct = static_cast<size_t>(Category::Activation);
constexpr size_t kParam = static_cast<size_t>(Category::Parameter);

RankSummary rank(int64_t r, int64_t peak, const std::string& path = "") {
  RankSummary s;
  s.rank = r;
  s.path = path.empty() ? "rank" + std::to_string(r) + ".pickle" : path;
  s.peak_allocated = peak;
  s.peak_reserved = peak + 100 * MiB;
  s.allocated_now = peak / 2;
  s.reserved_now = peak + 100 * MiB;
  s.kinds_peak[kParam] = peak / 2;
  s.kinds_peak[kAct] = peak - peak / 2;
  s.modules = {{"layers.0", peak / 4}, {"layers.1", peak / 4}};
  s.sites = {{"train.py:10:step", peak / 2, 3}};
  return s;
}

TEST(Ranks, MediansTypicalRankAndWhatDiffers) {
  std::vector<RankSummary> in;
  for (int r = 0; r < 8; ++r) in.push_back(rank(r, 1000 * MiB));
  // rank 5 holds 200 MiB more activations, made in layers.1 at one site
  in[5].peak_allocated += 200 * MiB;
  in[5].kinds_peak[kAct] += 200 * MiB;
  in[5].modules[1].bytes += 200 * MiB;
  in[5].sites.push_back({"model.py:40:forward", 200 * MiB, 1});
  // rank 2 is off by 4%, within the median's 5%: not an outlier
  in[2].peak_allocated += 40 * MiB;
  RanksReport rep = merge_ranks(in);
  EXPECT_EQ(rep.median[static_cast<size_t>(RankMetric::PeakAllocated)], double(1000 * MiB));
  EXPECT_EQ(rep.median_kinds_peak[kAct], 500 * MiB);
  EXPECT_EQ(rep.typical_rank, 0);
  ASSERT_EQ(rep.outliers.size(), 1u);
  const RankOutlier& o = rep.outliers[0];
  EXPECT_EQ(o.rank, 5);
  ASSERT_EQ(o.deltas.size(), 1u);
  const RankDelta& d = o.deltas[0];
  EXPECT_EQ(d.metric, RankMetric::PeakAllocated);
  EXPECT_EQ(d.value - d.median, double(200 * MiB));
  EXPECT_EQ(rank_parts_text(d.by),
            "by kind: activation +200.0MiB; by module: layers.1 +200.0MiB; by site: "
            "model.py:40:forward +200.0MiB");
}

TEST(Ranks, AnItemBelowACutListIsUnknownNotZero) {
  std::vector<RankSummary> in;
  for (int r = 0; r < 3; ++r) in.push_back(rank(r, 1000 * MiB));
  for (RankSummary& s : in) s.sites.push_back({"other.py:1:f", 300 * MiB, 1});
  // rank 1 holds 300 MiB more at its peak; its site list was cut before
  // other.py, so other.py is not "-300 MiB" on rank 1
  in[1].peak_allocated += 300 * MiB;
  in[1].sites = {{"train.py:10:step", 800 * MiB, 3}};
  in[1].sites_cut = true;
  RanksReport rep = merge_ranks(in);
  ASSERT_EQ(rep.outliers.size(), 1u);
  std::string parts = rank_parts_text(rep.outliers[0].deltas[0].by);
  EXPECT_NE(parts.find("train.py:10:step +300.0MiB"), std::string::npos) << parts;
  EXPECT_EQ(parts.find("other.py"), std::string::npos) << parts;
  in[1].sites_cut = false;  // a whole list: other.py is known to hold nothing
  parts = rank_parts_text(merge_ranks(in).outliers[0].deltas[0].by);
  EXPECT_NE(parts.find("other.py:1:f -300.0MiB"), std::string::npos) << parts;
}

TEST(Ranks, AnOomIsDifferentOrOnlyFirst) {
  std::vector<RankSummary> in;
  for (int r = 0; r < 4; ++r) in.push_back(rank(r, 1000 * MiB));
  RankOom oom;
  oom.verdict = "demand";
  in[3].ooms.push_back(oom);
  RanksReport same = merge_ranks(in);
  ASSERT_EQ(same.oom_verdicts.size(), 1u);
  EXPECT_FALSE(same.oom_verdicts[0].different);
  EXPECT_NE(same.oom_verdicts[0].text.find("Rank 3 was not different"), std::string::npos);

  in[3].ooms[0].verdict = "limit";  // the same work under a cap: the device differs
  RanksReport capped = merge_ranks(in);
  EXPECT_FALSE(capped.oom_verdicts[0].text.find("what differs is its device: a memory cap") ==
               std::string::npos)
      << capped.oom_verdicts[0].text;

  in[3].ooms[0].verdict = "demand";
  in[3].peak_allocated = 1500 * MiB;
  RanksReport more = merge_ranks(in);
  EXPECT_TRUE(more.oom_verdicts[0].different);
  EXPECT_NE(more.oom_verdicts[0].text.find("is 500.0MiB (50.0%) above the other ranks' median"),
            std::string::npos)
      << more.oom_verdicts[0].text;

  in[3].peak_allocated = 500 * MiB;
  in[3].ooms[0].verdict = "other processes";
  RanksReport less = merge_ranks(in);
  EXPECT_TRUE(less.oom_verdicts[0].different);
  EXPECT_NE(less.oom_verdicts[0].text.find("look at its device (other processes)"),
            std::string::npos)
      << less.oom_verdicts[0].text;
}

TEST(Ranks, NumberingDuplicatesAndMissing) {
  std::vector<RankSummary> in = {rank(-1, MiB, "a.pickle"), rank(0, MiB), rank(-1, MiB, "b.pickle"),
                                 rank(3, MiB)};
  for (RankSummary& s : in) s.origin.world_size = 6;
  RanksReport rep = merge_ranks(in);
  ASSERT_EQ(rep.ranks.size(), 4u);
  EXPECT_EQ(rep.ranks[1].path, "a.pickle");  // the numbers not taken, in argument order
  EXPECT_EQ(rep.ranks[1].rank, 1);
  EXPECT_EQ(rep.ranks[1].rank_from, "argument order");
  EXPECT_EQ(rep.ranks[2].path, "b.pickle");
  EXPECT_EQ(rep.world_size, 6);
  EXPECT_EQ(rep.missing, (std::vector<RankRange>{{4, 5}}));
  ASSERT_FALSE(rep.notes.empty());
  EXPECT_EQ(rep.notes[0].rfind("ranks 1, 2 numbered by argument order", 0), 0u) << rep.notes[0];

  std::vector<RankSummary> twice = {rank(2, MiB, "x/r2.pickle"), rank(2, MiB, "y/r2.pickle")};
  try {
    merge_ranks(twice);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("rank 2 appears twice: x/r2.pickle and y/r2.pickle", 0),
              0u)
        << e.what();
  }
}

TEST(Ranks, TheSameDumpUnderTwoNamesIsReadOnce) {
  // OOMObserver's snapshot and its name in the round: one file, two names
  RankSummary oom = rank(1, MiB, "run/rank1_oom_snapshot.pickle");
  oom.origin.tag = "oom";
  oom.origin.seq = 2;
  oom.origin.time = 1795000000.5;
  RankSummary link = oom;
  link.path = "run/oom_2_rank1.pickle";
  RanksReport rep = merge_ranks({rank(0, MiB), oom, link});
  ASSERT_EQ(rep.ranks.size(), 2u);
  EXPECT_EQ(rep.ranks[1].path, "run/rank1_oom_snapshot.pickle");
  EXPECT_EQ(rep.notes.at(0),
            "the same dump under two names, read once: run/oom_2_rank1.pickle "
            "(run/rank1_oom_snapshot.pickle)");
  // another round of the same rank is an error that names the round to pick
  RankSummary later = link;
  later.origin.tag = "manual";
  later.origin.seq = 3;
  later.path = "run/manual_3_rank1.pickle";
  try {
    merge_ranks({oom, later});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 1 appears twice: run/rank1_oom_snapshot.pickle and run/manual_3_rank1.pickle; "
              "give the files of one dump round (e.g. run/manual_3_manifest.json or "
              "'run/manual_3_rank*.pickle')");
  }
}

TEST(Ranks, MismatchesAreNamedNotFatal) {
  std::vector<RankSummary> in;
  for (int r = 0; r < 4; ++r) {
    in.push_back(rank(r, 1000 * MiB));
    in.back().origin.torch_version = r < 3 ? "2.5.1" : "2.4.0";
    in.back().origin.device_name = r == 0 ? "NVIDIA A100-SXM4-40GB" : "NVIDIA H100 80GB HBM3";
    in.back().origin.tag = "oom";
    in.back().origin.seq = r == 2 ? 3 : 4;
  }
  RanksReport rep = merge_ranks(in);
  ASSERT_EQ(rep.mismatches.size(), 3u);
  EXPECT_EQ(rep.mismatches[0], "torch versions differ: 2.4.0 (rank 3), 2.5.1 (ranks 0-2)");
  EXPECT_EQ(rep.mismatches[1],
            "devices differ: NVIDIA A100-SXM4-40GB (rank 0), NVIDIA H100 80GB HBM3 (ranks 1-3)");
  EXPECT_EQ(rep.mismatches[2],
            "the dumps come from different rounds: oom round 3 (rank 2), oom round 4 (ranks 0, 1, "
            "3)");
}

TEST(Ranks, Ranges) {
  EXPECT_EQ(rank_ranges({7, 0, 1, 2, 3, 5, 8, 9}), "0-3, 5, 7-9");
  EXPECT_EQ(rank_ranges({4, 5}), "4, 5");
  EXPECT_EQ(rank_ranges(std::vector<int64_t>{}), "");
  EXPECT_EQ(rank_ranges(std::vector<RankRange>{{0, 0}, {2, 99'999'999}}), "0, 2-99,999,999");
}

// A declared world size is a range to say, never entries to allocate
// (issue 34, item 2): 10^9 missing ranks take three ranges.
TEST(Ranks, MissingRanksAreRanges) {
  EXPECT_EQ(ranks_missing(1'000'000'000, {1, 5}),
            (std::vector<RankRange>{{0, 0}, {2, 4}, {6, 999'999'999}}));
  EXPECT_EQ(ranks_missing(3, {0, 1, 2}), std::vector<RankRange>{});
  EXPECT_EQ(ranks_missing(2, {0, 7}),
            (std::vector<RankRange>{{1, 1}}));  // past the size: not missing
  std::vector<RankSummary> in = {rank(0, MiB), rank(1, MiB)};
  for (RankSummary& s : in) s.origin.world_size = kMaxWorldSize;
  RanksReport rep = merge_ranks(in);
  EXPECT_EQ(rep.missing, (std::vector<RankRange>{{2, kMaxWorldSize - 1}}));
  EXPECT_EQ(rank_count(rep.missing), kMaxWorldSize - 2);
  EXPECT_NE(ranks_text(rep).find("missing: no dump of ranks 2-2,147,483,646 (2,147,483,645 ranks)"),
            std::string::npos);
  EXPECT_LT(ranks_json(rep).size(), 200'000u);
}

TEST(Ranks, SummaryOfARealSnapshotAndItsRankFromTheName) {
  Snapshot snap = read_snapshot_file(std::string(MEMSIGHT_TEST_DATA) + "/oom.pickle");
  RankSummary r = summarize_rank(snap, "run/oom_3_rank12.pickle");
  EXPECT_EQ(r.rank, 12);
  EXPECT_EQ(r.rank_from, "file name");
  // the numbers are summary's, of the same device
  Summary s = summarize(snap);
  const DeviceSummary& d = s.devices[static_cast<size_t>(r.device)];
  EXPECT_EQ(r.peak_allocated, d.peak_allocated);
  EXPECT_EQ(r.peak_reserved, d.peak_reserved);
  EXPECT_EQ(r.allocated_now, d.allocated_now);
  EXPECT_EQ(r.kinds_peak, d.categories_peak.totals.bytes);
  ASSERT_EQ(r.ooms.size(), d.ooms.size());
  EXPECT_EQ(r.ooms[0].verdict, oom_cause_name(d.ooms[0].verdict));
  EXPECT_EQ(r.sites.front().site, d.top_sites.front().site);
  EXPECT_EQ(summarize_rank(snap, "x/RANK-4_dump.pickle").rank, 4);
  EXPECT_EQ(summarize_rank(snap, "rank_5/last.pickle").rank, -1);  // the file's name only
  EXPECT_EQ(summarize_rank(snap, "snapshot.pickle").rank, -1);
}

}  // namespace
}  // namespace memsight
