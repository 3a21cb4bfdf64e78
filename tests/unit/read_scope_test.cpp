// ReadScope::SegmentsOnly: the trace is walked, not decoded. The reports it
// serves must equal those of a full read, and it must never accept an input
// the full read would call broken for reasons other than the trace's content.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "../common/scope_agreement.h"
#include "input/source.h"
#include "memsight/pyvalue.h"
#include "memsight/reader.h"
#include "memsight/text_tools.h"
#include "pickle/unpickler.h"
#include "test_data.h"
#include "util/parallel.h"

namespace fs = std::filesystem;
using namespace memsight;

namespace {

using test::fixture_names;
using test::slurp;

// The property every input must have, whatever its bytes.
void expect_consistent(std::string_view bytes, const std::string& what) {
  EXPECT_EQ(test::scope_disagreement(test::read_both_scopes(bytes)), "") << what;
}

class Scope : public ::testing::TestWithParam<std::string> {};

TEST_P(Scope, SegmentsOnlyMatchesTorchAndSkips) {
  fs::path dir = MEMSIGHT_TEST_DATA;
  const std::string name = GetParam();
  Snapshot snap =
      read_snapshot_file((dir / (name + ".pickle")).string(), {}, ReadScope::SegmentsOnly);
  EXPECT_TRUE(snap.trace_skipped) << "fell back to a full read";
  EXPECT_EQ(snap.trace.rows(), 0u);
  EXPECT_EQ(segsum(snap), slurp(dir / (name + ".stats.txt")));
  EXPECT_EQ(folded_memory(snap), slurp(dir / (name + ".memory.folded")));
  EXPECT_EQ(folded_segments(snap), slurp(dir / (name + ".segments.folded")));
  // Keys after the trace (allocator_settings, annotations) are still read.
  Snapshot full = read_snapshot_file((dir / (name + ".pickle")).string());
  ASSERT_EQ(snap.top_level.size(), full.top_level.size());
  for (size_t i = 0; i < snap.top_level.size(); ++i) {
    EXPECT_EQ(snap.top_level[i].first, full.top_level[i].first);
    EXPECT_EQ(py_repr(snap.top_level[i].second), py_repr(full.top_level[i].second));
  }
}

TEST_P(Scope, CutsAndCorruptionsAgreeWithFullRead) {
  const std::string bytes = slurp(fs::path(MEMSIGHT_TEST_DATA) / (GetParam() + ".pickle"));
  size_t step = std::max<size_t>(1, bytes.size() / 80);
  for (size_t at = 0; at < bytes.size(); at += step) {
    expect_consistent(std::string_view(bytes).substr(0, at), "cut at " + std::to_string(at));
    // A code-running opcode, an unknown one, a MARK, a memo read and a
    // SETITEMS planted in place of one byte.
    for (char c : {'\x93', '\xff', '(', 'h', 'u'}) {
      std::string bad = bytes;
      bad[at] = c;
      expect_consistent(bad, "byte " + std::to_string(at) + " set to " + std::to_string(c & 0xff));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Scope, ::testing::ValuesIn(fixture_names()));

// The 856k-entry training run from ../shared, walked by helper threads: the
// same reports as a full read, and damage inside a helper's share of the
// trace is caught (the read starts again in full and agrees with it).
TEST(ReadScope, ParallelWalkOfALargeTrace) {
  std::string why, bytes = test::large_fixture(why);
  if (bytes.empty()) GTEST_SKIP() << why;
  thread_limit = 4;
  uint64_t walks = skip_stats::parallel_walks;
  expect_consistent(bytes, "large");
  EXPECT_EQ(skip_stats::parallel_walks, walks + 1) << "helpers did not walk the trace";
  Snapshot part = read_snapshot_bytes(bytes, ReadScope::SegmentsOnly);
  EXPECT_TRUE(part.trace_skipped);
  for (double at : {0.45, 0.7, 0.9}) {
    auto pos = static_cast<size_t>(static_cast<double>(bytes.size()) * at);
    pos = bytes.find("}\x94(", pos);  // an entry's start
    ASSERT_NE(pos, std::string::npos);
    std::string bad = bytes;
    bad[pos] = '\x93';  // STACK_GLOBAL: code, refused
    expect_consistent(bad, "code at " + std::to_string(pos));
    bad = bytes;
    bad[pos + 2] = 'u';  // SETITEMS without its MARK
    expect_consistent(bad, "SETITEMS at " + std::to_string(pos));
  }
  expect_consistent(std::string_view(bytes).substr(0, bytes.size() * 3 / 4), "cut");
  thread_limit = 0;
}

TEST(ReadScope, FuzzSeedsAgreeWithFullRead) {
  // Includes inputs the fuzzer found: one shares a segment's blocks list
  // with a trace entry's frames, which a full read once turned into a stack.
  for (auto& e :
       fs::directory_iterator(fs::path(MEMSIGHT_TEST_DATA) / ".." / "fuzz" / "corpus" / "snapshot"))
    expect_consistent(slurp(e.path()), e.path().filename().string());
}

// pickle.dumps({'segments': [], 'device_traces': [[{'action': 'alloc',
// 'addr': 1, 'size': 2, 'zz': 'x'}, {'action': 'free_completed', 'addr': 1,
// 'size': 2}]], 'later': 'x'}, protocol=4): 'later' is a memo read of a
// string first seen inside the trace.
constexpr char kStringAfterTrace[] =
    "\x80\x04\x95\x82\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08\x73\x65\x67\x6d\x65\x6e"
    "\x74\x73\x94\x5d\x94\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d"
    "\x94\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f"
    "\x63\x94\x8c\x04\x61\x64\x64\x72\x94\x4b\x01\x8c\x04\x73\x69\x7a\x65\x94\x4b\x02\x8c\x02"
    "\x7a\x7a\x94\x8c\x01\x78\x94\x75\x7d\x94\x28\x68\x07\x8c\x0e\x66\x72\x65\x65\x5f\x63\x6f"
    "\x6d\x70\x6c\x65\x74\x65\x64\x94\x68\x09\x4b\x01\x68\x0a\x4b\x02\x75\x65\x61\x8c\x05\x6c"
    "\x61\x74\x65\x72\x94\x68\x0c\x75\x2e";

// E = {'action': 'alloc', 'addr': 1, 'size': 2}; pickle.dumps({'segments':
// [], 'device_traces': [[E]], 'later': E}, protocol=4): 'later' is a memo
// read of a dict inside the trace, which a segments-only read cannot give.
constexpr char kDictAfterTrace[] =
    "\x80\x04\x95\x59\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08\x73\x65\x67\x6d\x65\x6e"
    "\x74\x73\x94\x5d\x94\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d"
    "\x94\x5d\x94\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63"
    "\x94\x8c\x04\x61\x64\x64\x72\x94\x4b\x01\x8c\x04\x73\x69\x7a\x65\x94\x4b\x02\x75\x61\x61"
    "\x8c\x05\x6c\x61\x74\x65\x72\x94\x68\x06\x75\x2e";

TEST(ReadScope, StringsFromTheTraceStayReadable) {
  Snapshot s = read_snapshot_bytes({kStringAfterTrace, sizeof kStringAfterTrace - 1},
                                   ReadScope::SegmentsOnly);
  EXPECT_TRUE(s.trace_skipped);
  ASSERT_NE(s.top("later"), nullptr);
  EXPECT_EQ(py_repr(*s.top("later")), "'x'");
}

TEST(ReadScope, ValuesFromTheTraceForceAFullRead) {
  Snapshot s =
      read_snapshot_bytes({kDictAfterTrace, sizeof kDictAfterTrace - 1}, ReadScope::SegmentsOnly);
  EXPECT_FALSE(s.trace_skipped);
  EXPECT_EQ(s.trace.rows(), 1u);
  ASSERT_NE(s.top("later"), nullptr);
  EXPECT_EQ(py_repr(*s.top("later")), "{'action': 'alloc', 'addr': 1, 'size': 2}");
}

}  // namespace
