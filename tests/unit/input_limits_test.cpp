// memsight/input_limits.h: the one rule for numbers read from files, names
// cut with their length said, what was dropped counted once; and the places
// that use it (format_bytes, the page's summary strings, the trace reader on
// several threads).
#include "memsight/input_limits.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "memsight/profile.h"
#include "memsight/text_tools.h"
#include "pickle/unpickler.h"
#include "profile/trace_reader.h"
#include "report/page_json.h"
#include "util/json_writer.h"
#include "util/parallel.h"

namespace memsight {
namespace {

TEST(InputLimits, NumbersWithin2To53) {
  EXPECT_TRUE(byte_count_ok(0));
  EXPECT_TRUE(byte_count_ok(9007199254740991.0));
  EXPECT_FALSE(byte_count_ok(9007199254740992.0));      // 2^53
  EXPECT_FALSE(byte_count_ok(9223372036854775807.0));   // 2^63-1
  EXPECT_FALSE(byte_count_ok(18446744073709551616.0));  // 2^64
  EXPECT_FALSE(byte_count_ok(-1));
  EXPECT_FALSE(byte_count_ok(0.5));
  EXPECT_FALSE(byte_count_ok(std::nan("")));
  EXPECT_TRUE(byte_change_ok(-512));
  EXPECT_FALSE(byte_change_ok(-9007199254740992.0));
  EXPECT_TRUE(time_ok(1.7e15));  // µs since 1970
  EXPECT_FALSE(time_ok(1e300));
  EXPECT_FALSE(time_ok(std::nan("")));
  EXPECT_TRUE(duration_ok(0));
  EXPECT_FALSE(duration_ok(-1));
  EXPECT_FALSE(duration_ok(1e300));
  EXPECT_EQ(add_saturated(INT64_MAX - 1, 5), INT64_MAX);
  EXPECT_EQ(add_saturated(INT64_MIN + 1, -5), INT64_MIN);
  EXPECT_EQ(add_saturated(2, 3), 5);
}

TEST(InputLimits, NamesAreCutWithTheirLengthSaid) {
  EXPECT_EQ(cut_name("aten::mm"), "aten::mm");
  std::string big(100000, 'x');
  std::string cut = cut_name(big);
  EXPECT_EQ(cut, std::string(kNameLimit, 'x') + "\xE2\x80\xA6 [cut at 16384 of 100000 bytes]");
  // Cut again (a table's column): the length in the file is kept.
  EXPECT_EQ(cut_name(cut, 10), "xxxxxxxxxx\xE2\x80\xA6 [cut at 10 of 100000 bytes]");
  EXPECT_EQ(cut_name(cut, kNameLimit + 100), cut);
  // Within 40 bytes of the limit a name stays whole: the note would not shorten it.
  EXPECT_EQ(cut_name(std::string(140, 'k'), 100), std::string(140, 'k'));
  EXPECT_EQ(cut_name(std::string(141, 'k'), 100),
            std::string(100, 'k') + "\xE2\x80\xA6 [cut at 100 of 141 bytes]");
  // No UTF-8 sequence is split: "é" is two bytes.
  std::string accents;
  for (int i = 0; i < 30; ++i) accents += "\xC3\xA9";
  EXPECT_EQ(cut_name(accents, 5), "\xC3\xA9\xC3\xA9\xE2\x80\xA6 [cut at 4 of 60 bytes]");
}

TEST(InputLimits, NotesCountByReasonAndSayItOnce) {
  static constexpr InputReason kA{"event", "events", "dropped: a bad time"};
  static constexpr InputReason kB{"record", "records", "dropped: a bad size"};
  InputNotes n, m;
  EXPECT_TRUE(n.empty());
  n.add(kA);
  n.add(kB, 0);  // nothing to say
  m.add(kA, 2);
  m.add(kB);
  n.merge(m);
  EXPECT_EQ(n.text("input: "),
            "input: 3 events dropped: a bad time\ninput: 1 record dropped: a bad size\n");
  std::string json;
  JsonWriter w(json);
  n.json(w);
  EXPECT_EQ(json,
            "[{\"count\":3,\"note\":\"3 events dropped: a bad time\"},"
            "{\"count\":1,\"note\":\"1 record dropped: a bad size\"}]");
}

TEST(InputLimits, MemsightsSizesChooseTheUnitAfterRounding) {
  const double almost_tib = 1023.96 * 1024 * 1024 * 1024;
  EXPECT_EQ(format_size(almost_tib), "1024.0GiB");  // torch's rule, for the text tools
  EXPECT_EQ(format_bytes(almost_tib), "1.0TiB");
  EXPECT_EQ(format_bytes(1024.0 * 1024 * 1024 * 1024), "1.0TiB");
  EXPECT_EQ(format_bytes(1023.9 * 1024), "1023.9KiB");
  EXPECT_EQ(format_bytes(1023.95 * 1024), "1.0MiB");
  EXPECT_EQ(format_bytes(0), "0.0B");
  EXPECT_EQ(format_bytes(-2048), "-2.0KiB");
  // Below the boundary both rules agree.
  for (double v : {1.0, 1000.0, 5e6, 3.3e9, 7e12}) EXPECT_EQ(format_bytes(v), format_size(v)) << v;
}

TEST(InputLimits, PageReportStringsAreCut) {
  std::string name(40000, 'n');
  std::string json = "{\"site\":\"" + name + "\",\"short\":\"a\\\"b\",\"k\":1}";
  std::string out = report::cut_json_strings(json, 100);
  EXPECT_EQ(out, "{\"site\":\"" + std::string(100, 'n') +
                     "\xE2\x80\xA6 [cut at 100 of 40000 bytes]\",\"short\":\"a\\\"b\",\"k\":1}");
  // Escapes count as the characters they stand for, and survive the cut.
  std::string escaped = "[\"" + std::string(60, 'q') + "\\n\\u00e9" + std::string(160, 'q') + "\"]";
  out = report::cut_json_strings(escaped, 100);
  EXPECT_EQ(out, "[\"" + std::string(60, 'q') + "\\n\xC3\xA9" + std::string(37, 'q') +
                     "\xE2\x80\xA6 [cut at 100 of 223 bytes]\"]");
  EXPECT_EQ(report::cut_json_strings(json, 1 << 20), json);  // nothing to cut: as it was
}

// Writes a trace of `n` steps with out-of-range numbers scattered through it.
std::string bad_trace(int n) {
  std::string s = "{\"traceEvents\": [\n";
  for (int i = 0; i < n; ++i) {
    std::string ts = std::to_string(i * 10);
    if (i) s += ",\n";
    s += "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#" +
         std::to_string(i % 1000) + "\",\"tid\":1,\"ts\":" + ts +
         ",\"dur\":9,\"args\":{\"pad\":\"" + std::string(200, 'p') + "\"}},\n";
    s += "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::empty\",\"tid\":1,\"ts\":" + ts +
         ",\"dur\":" + (i % 97 == 0 ? "1e300" : "2") + "},\n";
    std::string bytes = i % 89 == 0 ? "18446744073709551616" : "512";
    s +=
        "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"tid\":1,\"ts\":" + ts +
        ".5,\"args\":{\"Device Type\":1,\"Device Id\":0,\"Addr\":" + std::to_string(i) +
        ",\"Bytes\":" + bytes + ",\"Total Allocated\":" + std::to_string(512 * (i + 1)) +
        ",\"Total Reserved\":4194304}}";
  }
  return s + "\n]}\n";
}

std::string report_with_threads(const std::string& path, unsigned threads) {
  thread_limit = threads;
  std::string out = profile_json(analyze_profile(read_profile_trace(path)));
  thread_limit = 0;
  return out;
}

TEST(InputLimits, TraceReaderCountsTheSameOnSeveralThreads) {
  // A name of this process: builds side by side share /tmp, and a mapped file
  // truncated by another run is a SIGBUS.
  std::string path =
      ::testing::TempDir() + "/memsight_bad_trace." + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << bad_trace(40000);  // ~20 MB: read in parts
  std::string one = report_with_threads(path, 1);
  EXPECT_NE(one.find("{\"count\":413,\"note\":\"413 events dropped: a duration (dur)"),
            std::string::npos)
      << one.substr(0, 600);
  EXPECT_NE(one.find("{\"count\":450,\"note\":\"450 [memory] events dropped: a byte count"),
            std::string::npos);
  // ProfilerStep#0..999 forty times each: labelled by occurrence.
  EXPECT_NE(one.find("{\"step\":7,\"occurrence\":40,\"occurrences\":40,"), std::string::npos);
  uint64_t taken = profile_stats::parts_taken;
  EXPECT_EQ(report_with_threads(path, 4), one);
  EXPECT_GT(profile_stats::parts_taken, taken) << "the trace was not read in parts";
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memsight
