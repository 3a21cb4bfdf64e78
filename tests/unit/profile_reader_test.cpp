// The trace reader gives the same trace on several threads as on one, with
// cuts that fall inside strings ("}, {" in names), and the same error for a
// damaged trace.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "memsight/error.h"
#include "memsight/profile.h"
#include "pickle/unpickler.h"
#include "profile/trace_reader.h"
#include "util/parallel.h"

namespace {

std::string big_trace(bool damaged) {
  std::string s = "{\"schemaVersion\": 1, \"traceEvents\": [\n";
  for (int i = 0; i < 120000; ++i) {
    if (i) s += ",\n";
    // some names hold what looks like an item boundary: cuts may fall inside strings
    std::string odd = i % 7 == 0 ? "}, {" : "";
    s += "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op" + odd + std::to_string(i % 97) +
         "\", \"pid\": 1, \"tid\": " + std::to_string(i % 3) +
         ", \"ts\": " + std::to_string(i * 10) +
         ".5, \"dur\": 3, \"args\": {\"Input Dims\": [[8, 512], []], \"s\": \"x\\\"" + odd +
         "\"}},\n";
    s += "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"tid\": " +
         std::to_string(i % 3) + ", \"ts\": " + std::to_string(i * 10 + 1) +
         ", \"args\": {\"Total Allocated\": " + std::to_string(1000 + i) +
         ", \"Total Reserved\": 4096, \"Bytes\": 512, \"Addr\": " + std::to_string(i) +
         ", \"Device Type\": 1, \"Device Id\": 0}}";
    if (damaged && i == 100000) s += "x";
  }
  s += "\n], \"traceName\": \"t\"}\n";
  return s;
}

std::string report_of(const std::string& path, unsigned threads) {
  memsight::thread_limit = threads;
  std::string out;
  try {
    out = memsight::profile_json(memsight::analyze_profile(memsight::read_profile_trace(path)));
  } catch (const memsight::Error& e) {
    out = std::string("error: ") + e.what();
  }
  memsight::thread_limit = 0;
  return out;
}

TEST(ProfileReader, SeveralThreadsReadAsOne) {
  for (bool damaged : {false, true}) {
    // A name of this process: builds side by side share /tmp, and a mapped
    // file truncated by another run is a SIGBUS.
    std::string path =
        ::testing::TempDir() + "/memsight_trace." + std::to_string(::getpid()) + ".json";
    std::ofstream(path) << big_trace(damaged);
    std::string one = report_of(path, 1);
    EXPECT_EQ(one.starts_with("error: "), damaged) << one.substr(0, 200);
    uint64_t taken = memsight::profile_stats::parts_taken;
    for (unsigned n : {2u, 4u, 7u}) EXPECT_EQ(report_of(path, n), one) << n << " threads";
    if (!damaged) {  // threads really helped
      EXPECT_GT(memsight::profile_stats::parts_taken, taken);
    }
    std::remove(path.c_str());
  }
}

// A step whose memory events allocate nothing (a size missing, so 0) has no
// allocation groups; analysing it used to index an empty table (found by
// fuzz_profile).
TEST(ProfileReader, MemoryEventsWithoutAllocations) {
  std::string path =
      ::testing::TempDir() + "/memsight_noalloc." + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << R"({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 2,
   "ts": 100.0, "dur": 50.0, "args": {}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 2, "ts": 110.0,
   "dur": 5.0, "args": {"External id": 1}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 2,
   "ts": 111.0, "args": {"Total Reserved": 2097152, "Total Allocated": 512, "Addr": 7,
   "Device Id": 0, "Device Type": 1}}]})";
  std::string out = report_of(path, 1);
  EXPECT_FALSE(out.starts_with("error: ")) << out;
  EXPECT_NE(out.find("\"peak_allocated\":512"), std::string::npos) << out.substr(0, 400);
  std::remove(path.c_str());
}

}  // namespace
