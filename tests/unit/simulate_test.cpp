// The simulation of torch's allocator against the recordings: under the
// recorded settings it must make the recorded decisions (every segment
// event, its size and the request it served, and the reserved peak).
#include "allocator/simulate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "memsight/reader.h"
#include "test_data.h"

namespace memsight::simulate {
namespace {

namespace fs = std::filesystem;

std::string describe(const std::vector<SegmentEvent>& ev, size_t i) {
  if (i >= ev.size()) return "(none)";
  return std::string(action_name(ev[i].action)) + " " + std::to_string(ev[i].size) + " for entry " +
         std::to_string(ev[i].owner);
}

// "" when the simulation under the recorded settings reproduces the record.
std::string self_check(const Snapshot& snap, size_t d) {
  Plan p = plan(snap, d);
  Result r = run(snap, p, Inputs::recorded(snap, p));
  size_t n = std::max(r.events.size(), p.recorded.size());
  for (size_t i = 0; i < n; ++i)
    if (i >= r.events.size() || i >= p.recorded.size() || !(r.events[i] == p.recorded[i]))
      return "segment event " + std::to_string(i) + ": recorded " + describe(p.recorded, i) +
             ", simulated " + describe(r.events, i);
  if (r.peak.reserved != p.recorded_peak_reserved)
    return "peak reserved " + std::to_string(r.peak.reserved) + " != recorded " +
           std::to_string(p.recorded_peak_reserved);
  if (r.stopped_at >= 0) return "a new OOM at entry " + std::to_string(r.stopped_at);
  if (r.misplaced) return std::to_string(r.misplaced) + " blocks placed elsewhere than torch";
  std::vector<int32_t> sim_ooms;
  for (const Oom& o : r.ooms) sim_ooms.push_back(o.event);
  if (sim_ooms != p.recorded_ooms) return "the OOMs differ";
  return "";
}

TEST(Simulate, ReproducesEveryRecording) {
  int checked = 0;
  for (const auto& dir :
       {fs::path(MEMSIGHT_TEST_DATA), fs::path(MEMSIGHT_TEST_DATA) / "counters"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".pickle") continue;
      std::string name = e.path().stem().string();
      if (name == "wrapped" || name == "state_only") continue;  // no complete history
      Snapshot snap = read_snapshot_file(e.path().string());
      for (size_t d = 0; d < snap.device_count(); ++d) {
        EXPECT_EQ(self_check(snap, d), "") << name << " device " << d;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 23);
}

// 856,152 entries of a real 300-step run: every block at its address.
TEST(Simulate, ReproducesTheLargeRecording) {
  std::string why;
  std::string bytes = test::large_fixture(why);
  if (bytes.empty()) GTEST_SKIP() << why;
  Snapshot snap = read_snapshot_bytes(bytes);
  EXPECT_EQ(self_check(snap, 0), "");
}

}  // namespace
}  // namespace memsight::simulate
