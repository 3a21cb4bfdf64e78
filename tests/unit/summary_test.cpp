// summarize() keeps one summary for each group of alike devices (every empty
// one, or many devices of one allocation each); summary_json must still list
// every device, with the same bytes as when each is summarised.
#include "memsight/summary.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "analysis/summary/summary_hash.h"
#include "analysis/summary/summary_times.h"
#include "memsight/reader.h"
#include "test_data.h"

namespace memsight {
namespace {

SummaryOptions each_apart() {
  SummaryOptions o;
  o.group_alike = false;
  return o;
}

std::string json_every(const Snapshot& snap) {
  return summary_json(snap, summarize(snap, each_apart()));
}

std::string json_once(const Snapshot& snap) { return summary_json(snap, summarize(snap)); }

TEST(Summary, GroupedDevicesReadTheSame) {
  namespace fs = std::filesystem;
  int several = 0;
  for (const auto& dir :
       {fs::path(MEMSIGHT_TEST_DATA), fs::path(MEMSIGHT_TEST_DATA) / "counters"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".pickle") continue;
      Snapshot snap = read_snapshot_file(e.path().string());
      Summary once = summarize(snap);
      Summary every = summarize(snap, each_apart());
      if (every.devices.size() > 1) ++several;
      EXPECT_EQ(summary_json(snap, once), summary_json(snap, every)) << e.path();
    }
  }
  EXPECT_GE(several, 2);  // two_devices, counters/fsdp2_rank1 (device 0 lists no entries)
}

TEST(Summary, AllEmptyDevicesAreListedAndCostOneSummary) {
  // pickle.dumps({"segments": [], "device_traces": [[], [], []]}, protocol=2)
  static const char kPickle[] =
      "\x80\x02\x7d\x71\x00\x28\x58\x08\x00\x00\x00"
      "segments"
      "\x71\x01\x5d\x71\x02\x58\x0d\x00"
      "\x00\x00"
      "device_traces"
      "\x71\x03\x5d\x71\x04\x28\x5d\x71\x05\x5d\x71\x06\x5d\x71\x07\x65"
      "\x75\x2e";
  const std::string bytes(kPickle, sizeof kPickle - 1);
  ASSERT_EQ(bytes.size(), 60u);
  Snapshot snap = read_snapshot_bytes(bytes);
  Summary once = summarize(snap);
  ASSERT_EQ(once.devices.size(), 1u);
  EXPECT_EQ(once.members[0], (std::vector<std::pair<int, int>>{{0, 2}}));
  EXPECT_EQ(once.devices_listed, 3u);
  EXPECT_EQ(json_once(snap), json_every(snap));
  EXPECT_NE(json_once(snap).find("{\"device\":2,"), std::string::npos);
  // The page's listing holds only groups with something on them (none here).
  EXPECT_NE(summary_json(snap, once, DeviceListing::Page).find("\"devices\":[]"),
            std::string::npos);
  EXPECT_EQ(summary_text(snap, once),
            "The snapshot has no segments and no trace: nothing to report.\n");
}

}  // namespace
}  // namespace memsight

namespace memsight {
namespace {

// Devices of one allocation each are alike: one summary and one paragraph
// of text for all of them, and the JSON lists each, as summarised apart.
TEST(Summary, AlikeDevicesAreSummarisedOnce) {
  // {"segments": [], "device_traces": [[e], [e], [e], [], [e]]} with
  // e = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0,
  // "time_us": 1, "frames": []}, as protocol-2 opcodes.
  auto str = [](std::string_view t) {
    std::string o = "X";
    for (int i = 0; i < 4; ++i) o += static_cast<char>((t.size() >> (8 * i)) & 0xff);
    return o + std::string(t);
  };
  auto small = [](int v) { return std::string("K") + static_cast<char>(v); };
  std::string entry = "](}(" + str("action") + str("alloc") + str("addr") + "M" +
                      std::string("\x00\x10", 2) + str("size") + "M" + std::string("\x00\x02", 2) +
                      str("stream") + small(0) + str("time_us") + small(1) + str("frames") + "]ue";
  std::string p = "\x80\x02}(" + str("segments") + "]" + str("device_traces") + "](";
  for (int d = 0; d < 5; ++d) p += d == 3 ? "]" : entry;
  p += "eu.";
  Snapshot snap = read_snapshot_bytes(p);
  ASSERT_EQ(snap.device_count(), 5u);
  Summary s = summarize(snap);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.members[0], (std::vector<std::pair<int, int>>{{0, 2}, {4, 4}}));
  EXPECT_EQ(s.members[1], (std::vector<std::pair<int, int>>{{3, 3}}));
  EXPECT_EQ(json_once(snap), json_every(snap));
  std::string text = summary_text(snap, s);
  EXPECT_EQ(text.rfind("Devices 0-2, 4 (4 alike) - 1 trace entry, 0 segments\n", 0), 0u) << text;
  EXPECT_EQ(text.find("Device 3"), std::string::npos) << text;  // nothing on it
  // The page's form: the group once, its devices named.
  std::string page = summary_json(snap, s, DeviceListing::Page);
  EXPECT_NE(page.find("\"alike\":[[0,2],[4,4]]}"), std::string::npos) << page;
  EXPECT_EQ(page.find("{\"device\":4"), std::string::npos) << page;
}

// Devices that differ only in where their one allocation came from (each
// its own file) hash apart: a hash of a few counters gave them one hash, and
// each new device was compared with every group before it (devices^2; 10,000
// devices took 1.7 s, issue 34 item 1). Times count from each device's first
// entry, as the grouping compares them.
TEST(Summary, AlikeHashTellsDevicesOfOtherSitesApart) {
  auto str = [](std::string_view t) {
    std::string o = "X";
    for (int i = 0; i < 4; ++i) o += static_cast<char>((t.size() >> (8 * i)) & 0xff);
    return o + std::string(t);
  };
  auto small = [](int v) { return std::string("K") + static_cast<char>(v); };
  constexpr int kDevices = 64;
  std::string p = "\x80\x02}(" + str("segments") + "]" + str("device_traces") + "](";
  for (int d = 0; d < kDevices; ++d) {
    const std::string frame = "}(" + str("name") + str("n" + std::to_string(d)) + str("filename") +
                              str("f" + std::to_string(d) + ".py") + str("line") + small(1) + "u";
    p += "](}(" + str("action") + str("alloc") + str("addr") + "M" + std::string("\x00\x10", 2) +
         str("size") + "M" + std::string("\x00\x02", 2) + str("stream") + small(0) +
         str("time_us") + small(d) + str("frames") + "](" + frame + "eue";
  }
  p += "eu.";
  Snapshot snap = read_snapshot_bytes(p);
  ASSERT_EQ(snap.device_count(), static_cast<size_t>(kDevices));
  Summary every = summarize(snap, each_apart());
  std::set<uint64_t> hashes;
  for (size_t d = 0; d < every.devices.size(); ++d) {
    DeviceSummary& ds = every.devices[d];
    shift_times(ds, first_entry_time(snap, d), 0);
    hashes.insert(alike_hash(ds));
  }
  EXPECT_EQ(hashes.size(), static_cast<size_t>(kDevices));
  EXPECT_EQ(summarize(snap).devices.size(), static_cast<size_t>(kDevices));
  EXPECT_EQ(json_once(snap), json_every(snap));
}

}  // namespace
}  // namespace memsight
