// A big trace decoded on several threads (src/pickle/parallel_decode.cpp)
// must give exactly the model a one-thread read gives: every id in the same
// order, the same rows, and the same error for a damaged input. Small
// shares make the fixtures go through the parallel path.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "memsight/reader.h"
#include "pickle/opcodes.h"
#include "pickle/row_chunks.h"
#include "pickle/trace_walk.h"
#include "pickle/unpickler.h"
#include "test_data.h"
#include "util/parallel.h"

namespace fs = std::filesystem;
using namespace memsight;

namespace {

using test::fixture_names;
using test::slurp;

constexpr size_t kDefaultShare = 2 << 20;

struct Outcome {
  std::optional<Snapshot> snap;
  std::string error;
};

Outcome read(std::string_view bytes, unsigned threads, size_t share) {
  thread_limit = threads;
  decode_stats::share_bytes = share;
  Outcome out;
  try {
    out.snap.emplace(read_snapshot_bytes(bytes));
  } catch (const Error& e) {
    out.error = e.what();
  }
  thread_limit = 0;
  decode_stats::share_bytes = kDefaultShare;
  return out;
}

// "" when the two models are the same, table by table and id by id.
std::string model_difference(const Snapshot& a, const Snapshot& b) {
  if (a.strings.size() != b.strings.size()) return "string count";
  for (StrId i = 0; i < a.strings.size(); ++i)
    if (a.str(i) != b.str(i)) return "string " + std::to_string(i);
  if (a.frames.frame_count() != b.frames.frame_count()) return "frame count";
  for (FrameId i = 0; i < a.frames.frame_count(); ++i) {
    const Frame &x = a.frames.frame(i), &y = b.frames.frame(i);
    if (x.name != y.name || x.filename != y.filename || x.line != y.line || x.extra != y.extra)
      return "frame " + std::to_string(i);
  }
  if (a.frames.stack_count() != b.frames.stack_count()) return "stack count";
  for (StackId i = 0; i < a.frames.stack_count(); ++i) {
    auto x = a.frames.stack(i), y = b.frames.stack(i);
    if (!std::equal(x.begin(), x.end(), y.begin(), y.end())) return "stack " + std::to_string(i);
  }
  if (a.shapes.size() != b.shapes.size()) return "layout count";
  for (ShapeId i = 0; i < a.shapes.size(); ++i) {
    auto x = a.shapes.get(i), y = b.shapes.get(i);
    if (!std::equal(x.begin(), x.end(), y.begin(), y.end(),
                    [](const ShapeKey& p, const ShapeKey& q) {
                      return p.key == q.key && p.field == q.field;
                    }))
      return "layout " + std::to_string(i);
  }
  const TraceTable &s = a.trace, &t = b.trace;
  if (s.action != t.action) return "actions";
  if (s.addr != t.addr || s.size != t.size || s.stream != t.stream || s.time_us != t.time_us)
    return "row numbers";
  if (s.compile_context != t.compile_context || s.user_metadata != t.user_metadata)
    return "row strings";
  if (s.stack != t.stack) return "row stacks";
  if (s.shape != t.shape) return "row layouts";
  if (s.action_name != t.action_name) return "action names";
  if (s.extras.size() != t.extras.size()) return "row extras";
  if (a.device_begin != b.device_begin) return "devices";
  if (pickle_snapshot(a) != pickle_snapshot(b)) return "written pickle";
  return "";
}

std::string disagreement(std::string_view bytes, size_t share = 16 << 10) {
  Outcome one = read(bytes, 1, kDefaultShare);
  Outcome many = read(bytes, 4, share);
  if (one.snap && many.snap) return model_difference(*one.snap, *many.snap);
  if (one.snap) return "the parallel read failed: " + many.error;
  if (many.snap) return "the parallel read accepted what one thread refused: " + one.error;
  if (one.error != many.error) return "'" + many.error + "' against '" + one.error + "'";
  return "";
}

class ParallelDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(ParallelDecode, GivesTheOneThreadModel) {
  std::string bytes = slurp(fs::path(MEMSIGHT_TEST_DATA) / (GetParam() + ".pickle"));
  uint64_t before = decode_stats::parallel_decodes;
  EXPECT_EQ(disagreement(bytes, 4096), "");
  // A fixture whose trace spans several pickle frames is decoded in shares.
  if (bytes.size() > (256 << 10)) {
    EXPECT_GT(decode_stats::parallel_decodes, before) << "no share was decoded in parallel";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ParallelDecode, ::testing::ValuesIn(fixture_names()));

// The start of the n-th entry (EMPTY_DICT MEMOIZE MARK) at or after `from`.
size_t entry_at(const std::string& bytes, size_t from) { return bytes.find("}\x94(", from); }

TEST(ParallelDecode, DamageGivesTheOneThreadError) {
  std::string bytes = slurp(fs::path(MEMSIGHT_TEST_DATA) / "transformer_train.pickle");
  size_t trace = bytes.find("device_traces");
  ASSERT_NE(trace, std::string::npos);
  for (int i = 1; i < 40; ++i) {
    size_t pos = trace + (bytes.size() - trace) * static_cast<size_t>(i) / 40;
    EXPECT_EQ(disagreement(std::string_view(bytes).substr(0, pos)), "") << "cut at " << pos;
    for (char b : {'\x93', 'u', 'a', '\xff', '\x00'}) {
      std::string bad = bytes;
      bad[pos] = b;
      EXPECT_EQ(disagreement(bad), "") << "byte " << int(b) << " at " << pos;
      size_t entry = entry_at(bytes, pos);
      if (entry == std::string::npos) continue;
      bad = bytes;
      bad[entry + 3] = b;  // an entry's first key
      EXPECT_EQ(disagreement(bad), "") << "byte " << int(b) << " in the entry at " << entry;
    }
  }
}

// Entries the helpers do not decode (an int written as an empty LONG1), one
// every 2% of the file from 20% on, so that some fall in helpers' shares:
// a share ends at such an entry, and the main thread decodes on from it,
// giving the one-thread model.
TEST(ParallelDecode, AnEntryTheHelpersCannotDecodeEndsItsShare) {
  using namespace pickle_op;
  std::string bytes = slurp(fs::path(MEMSIGHT_TEST_DATA) / "transformer_train.pickle");
  std::string original = bytes;
  // In the first entry at or after each point, a value written as BININT1
  // 0 is written as LONG1 of length 0 (also 0): the same two bytes.
  size_t patched = 0;
  for (int percent = 20; percent < 100; percent += 2) {
    bool done = false;
    for (size_t e = entry_at(bytes, bytes.size() * static_cast<size_t>(percent) / 100);
         e != std::string::npos && !done; e = entry_at(bytes, e + 1)) {
      auto* q = reinterpret_cast<uint8_t*>(bytes.data()) + e + 3;
      for (int item = 0; item < 16 && *q != SETITEMS; ++item) {
        size_t n = trace_walk::op_size(q);
        if (n == 0) break;
        if (item % 2 == 1 && q[0] == BININT1 && q[1] == 0) {
          *q = LONG1;
          ++patched;
          done = true;
          break;
        }
        q += n;
        if (*q == MEMOIZE) ++q;
      }
    }
  }
  ASSERT_GT(patched, 20u);
  uint64_t cut = decode_stats::shares_cut;
  EXPECT_EQ(disagreement(bytes), "");
  EXPECT_GT(decode_stats::shares_cut, cut) << "the helpers decoded an entry they should not";
  Outcome patched_read = read(bytes, 4, 16 << 10), original_read = read(original, 1, kDefaultShare);
  ASSERT_TRUE(patched_read.snap && original_read.snap);
  EXPECT_EQ(model_difference(*patched_read.snap, *original_read.snap), "");  // 0 either way
}

// Two devices; an action name, frames and strings first seen deep in the
// trace and read back in later shares; frame lists shared between entries;
// an OOM entry (tests/data/make_synthetic.py).
TEST(ParallelDecode, TwoDevicesAndLateDefinitions) {
  std::string bytes =
      test::decompress(slurp(fs::path(MEMSIGHT_TEST_DATA) / "synthetic_two_devices.pickle.gz"));
  for (size_t share : {size_t{16} << 10, size_t{64} << 10, size_t{256} << 10}) {
    uint64_t before = decode_stats::parallel_decodes, refused = decode_stats::shares_refused,
             cut = decode_stats::shares_cut;
    EXPECT_EQ(disagreement(bytes, share), "") << share;
    EXPECT_EQ(decode_stats::parallel_decodes, before + 1) << share;
    EXPECT_EQ(decode_stats::shares_refused, refused) << share;
    EXPECT_EQ(decode_stats::shares_cut, cut) << share;
  }
  Outcome many = read(bytes, 4, 16 << 10);
  ASSERT_TRUE(many.snap);
  EXPECT_EQ(many.snap->device_count(), 2u);
  EXPECT_EQ(many.snap->trace.rows(), 28001u);
}

// An entry whose frames are a memo read of a string stored by an entry of
// the same share: not a stack, so the main thread refuses the share and
// decodes it itself.
TEST(ParallelDecode, AMemoReadOfTheWrongKindRefusesTheShare) {
  std::string bytes =
      test::decompress(slurp(fs::path(MEMSIGHT_TEST_DATA) / "synthetic_mixed_kinds.pickle.gz"));
  uint64_t refused = decode_stats::shares_refused;
  EXPECT_EQ(disagreement(bytes, 16 << 10), "");
  EXPECT_EQ(decode_stats::shares_refused, refused + 1);
}

// memsight's own pickles are framed like Python's, so they too are decoded
// in shares.
TEST(ParallelDecode, WrittenPicklesAreFramedAndDecodedInShares) {
  Snapshot snap =
      read_snapshot_bytes(slurp(fs::path(MEMSIGHT_TEST_DATA) / "transformer_train.pickle"));
  std::string written = pickle_snapshot(snap);
  ASSERT_GT(written.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(written[2]), pickle_op::FRAME);
  uint64_t before = decode_stats::parallel_decodes;
  EXPECT_EQ(disagreement(written, 4096), "");
  EXPECT_GT(decode_stats::parallel_decodes, before);
  Outcome back = read(written, 4, 4096);
  ASSERT_TRUE(back.snap);
  EXPECT_EQ(pickle_snapshot(*back.snap), written);
}

// The 856k-entry training run from ../shared, at the default share size.
TEST(ParallelDecode, LargeTraceGivesTheOneThreadModel) {
  std::string why, bytes = test::large_fixture(why);
  if (bytes.empty()) GTEST_SKIP() << why;
  uint64_t before = decode_stats::parallel_decodes;
  EXPECT_EQ(disagreement(bytes, kDefaultShare), "");
  EXPECT_EQ(decode_stats::parallel_decodes, before + 1);
}

}  // namespace
