// Our text tools against torch 2.11's own output for every fixture snapshot
// (tests/data/NAME.pickle and NAME.{stats.txt,trace.txt,memory.folded,segments.folded}).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "memsight/reader.h"
#include "memsight/text_tools.h"
#include "test_data.h"

namespace fs = std::filesystem;
using namespace memsight;

namespace {

using test::fixture_names;
using test::slurp;

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  fs::path dir = MEMSIGHT_TEST_DATA;
};

TEST_P(Golden, MatchesTorch) {
  const std::string name = GetParam();
  Snapshot snap = read_snapshot_file((dir / (name + ".pickle")).string());
  EXPECT_EQ(segsum(snap), slurp(dir / (name + ".stats.txt")));
  EXPECT_EQ(trace_text(snap), slurp(dir / (name + ".trace.txt")));
  EXPECT_EQ(folded_memory(snap), slurp(dir / (name + ".memory.folded")));
  EXPECT_EQ(folded_segments(snap), slurp(dir / (name + ".segments.folded")));
}

TEST_P(Golden, SurvivesRoundTrip) {
  // Writing back and reading again gives the same torch outputs.
  const std::string name = GetParam();
  Snapshot snap = read_snapshot_file((dir / (name + ".pickle")).string());
  Snapshot again = read_snapshot_bytes(pickle_snapshot(snap));
  EXPECT_EQ(segsum(again), segsum(snap));
  EXPECT_EQ(trace_text(again), trace_text(snap));
  EXPECT_EQ(folded_segments(again), folded_segments(snap));
  EXPECT_EQ(pickle_snapshot(again), pickle_snapshot(snap));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(fixture_names()));

}  // namespace
