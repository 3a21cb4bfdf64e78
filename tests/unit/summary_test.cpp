// summarize() without empty_devices summarises a device with no trace entries
// and no segments once; summary_json must still list every device, with the
// same bytes as when each is summarised.
#include "memsight/summary.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "memsight/reader.h"
#include "test_data.h"

namespace memsight {
namespace {

SummaryOptions once_each() {
  SummaryOptions o;
  o.empty_devices = false;
  return o;
}

std::string json_every(const Snapshot& snap) { return summary_json(snap, summarize(snap)); }

std::string json_once(const Snapshot& snap) {
  return summary_json(snap, summarize(snap, once_each()));
}

TEST(Summary, EmptyDevicesSummarisedOnceReadTheSame) {
  namespace fs = std::filesystem;
  int with_empty = 0;
  for (const auto& dir :
       {fs::path(MEMSIGHT_TEST_DATA), fs::path(MEMSIGHT_TEST_DATA) / "counters"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".pickle") continue;
      Snapshot snap = read_snapshot_file(e.path().string());
      Summary once = summarize(snap, once_each());
      Summary every = summarize(snap);
      if (once.devices.size() < every.devices.size()) ++with_empty;
      EXPECT_EQ(summary_json(snap, once), summary_json(snap, every)) << e.path();
    }
  }
  EXPECT_GE(with_empty, 1);  // counters/fsdp2_rank1: device 0 lists no entries
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
  Summary once = summarize(snap, once_each());
  EXPECT_TRUE(once.devices.empty());
  ASSERT_TRUE(once.empty_device.has_value());
  EXPECT_EQ(once.devices_listed, 3u);
  EXPECT_EQ(json_once(snap), json_every(snap));
  EXPECT_NE(json_once(snap).find("{\"device\":2,"), std::string::npos);
  // Without every_device only the summarised devices (none) are listed.
  EXPECT_NE(summary_json(snap, once, false).find("\"devices\":[]"), std::string::npos);
  EXPECT_EQ(summary_text(snap, once),
            "The snapshot has no segments and no trace: nothing to report.\n");
}

}  // namespace
}  // namespace memsight
