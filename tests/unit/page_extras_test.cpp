// What the page gained for the standalone viewer and the new views: the
// annotation ranges, and the page data handed out column by column.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "memsight/html.h"
#include "memsight/reader.h"
#include "model/device_dicts.h"
#include "report/page_annotations.h"
#include "report/page_pack.h"
#include "test_data.h"

namespace memsight {
namespace {

const std::string kData = MEMSIGHT_TEST_DATA;

PyValue annotation(const char* stage, const char* name, int64_t device, int64_t t) {
  PyValue d;
  d.kind = PyValue::Kind::Dict;
  d.items = {PyValue::str("stage"),   PyValue::str(stage),    PyValue::str("name"),
             PyValue::str(name),      PyValue::str("device"), PyValue::integer(device),
             PyValue::str("time_us"), PyValue::integer(t)};
  return d;
}

TEST(Annotations, PairedPerNameAndDeviceOpenEndsMarked) {
  Snapshot snap;
  snap.device_begin = {0, 0, 0};  // two devices, no trace
  snap.top_level.push_back(
      {"external_annotations",
       PyValue::list({annotation("END", "step#0", 0, 5),  // began before the recording
                      annotation("START", "fwd", 0, 10), annotation("START", "fwd", 0, 12),
                      annotation("START", "other", 1, 11), annotation("END", "fwd", 0, 20),
                      annotation("START", "step#1", 0, 15), PyValue::integer(3),  // not a dict
                      annotation("MIDDLE", "fwd", 0, 21), annotation("END", "fwd", 0, 30)})});
  report::AnnotationRanges r = report::annotation_ranges(snap, 0);
  EXPECT_EQ(r.name, (std::vector<std::string_view>{"step#0", "fwd", "fwd", "step#1"}));
  // The inner START is closed by the first END of its name.
  EXPECT_EQ(r.start, (std::vector<int64_t>{-1, 10, 12, 15}));
  EXPECT_EQ(r.end, (std::vector<int64_t>{5, 30, 20, -1}));
  report::AnnotationRanges r1 = report::annotation_ranges(snap, 1);
  EXPECT_EQ(r1.name, std::vector<std::string_view>{"other"});
  EXPECT_EQ(r1.end, std::vector<int64_t>{-1});
  EXPECT_TRUE(report::annotation_ranges(snap, 2).name.empty());
}

TEST(Annotations, IndexedByTheDeviceEachNames) {
  // One index a snapshot, each device's in list order; an annotation with
  // no integer device belongs to none (every device scanned the whole list,
  // and analyses counted one without a device for every device).
  Snapshot snap;
  snap.device_begin = {0, 0, 0};
  PyValue no_device = annotation("START", "ProfilerStep#9", 0, 1);
  no_device.items = {PyValue::str("stage"), PyValue::str("START"), PyValue::str("name"),
                     PyValue::str("ProfilerStep#9")};
  snap.top_level.push_back(
      {"external_annotations",
       PyValue::list({annotation("START", "a", 1, 5), annotation("START", "b", 0, 4), no_device,
                      annotation("END", "c", 1, 3), PyValue::integer(7)})});
  auto names = [&](int64_t d) {
    std::vector<std::string_view> out;
    for (const PyValue* a : snap.annotations().of(d)) out.push_back(a->get("name")->s);
    return out;
  };
  EXPECT_EQ(names(1), (std::vector<std::string_view>{"a", "c"}));
  EXPECT_EQ(names(0), (std::vector<std::string_view>{"b"}));
  EXPECT_TRUE(names(2).empty());
  EXPECT_EQ(&snap.annotations(), &snap.annotations());  // built once
  Snapshot moved = std::move(snap);                     // builds its own
  EXPECT_EQ(moved.annotations().of(1).size(), 2u);
}

TEST(Annotations, ExternalAndUserDefinedEntriesOfTheSyntheticFixture) {
  Snapshot snap = read_snapshot_file(kData + "/synthetic_annotated.pickle.gz");
  report::AnnotationRanges r = report::annotation_ranges(snap, 0);
  EXPECT_EQ(r.name,
            (std::vector<std::string_view>{"ProfilerStep#0", "ProfilerStep#1", "## forward ##",
                                           "## forward ##", "legacy_scope", "ProfilerStep#2"}));
  EXPECT_EQ(r.start[0], -1);
  EXPECT_EQ(r.end[5], -1);
  // legacy_scope: the times of its two user_defined trace entries (8 and 14).
  EXPECT_EQ(r.start[4], snap.trace.time_us[8]);
  EXPECT_EQ(r.end[4], snap.trace.time_us[14]);
  EXPECT_EQ(report::annotation_ranges(snap, 1).name,
            std::vector<std::string_view>{"ProfilerStep#1"});
}

TEST(PagePack, ASinkGetsTheColumnsInBlobOrder) {
  auto pack = [](report::PagePacker& p) {
    p.ints("a", std::vector<int64_t>{1, 2, 3});
    p.ints("b", std::vector<int64_t>(1000, 7));        // const
    p.ints("c", std::vector<int64_t>{1LL << 40, -5});  // f64
    p.f64("d", std::vector<double>{0.5, 1.5});
    p.u8("e", "bytes");
    return p.finish("{\"x\":1}");
  };
  report::PagePacker whole;
  std::string blob = pack(whole);
  report::PagePacker piecewise;
  std::string pieces;
  int count = 0;
  piecewise.set_sink([&](std::string_view s) {
    EXPECT_EQ(s.size() % 8, 0u);
    pieces += s;
    ++count;
  });
  std::string head = pack(piecewise);
  EXPECT_EQ(count, 4);  // every column but the const one
  EXPECT_EQ(head + pieces, blob);
}

TEST(PageData, TheStandaloneViewersPiecesMakeTheSamePageData) {
  for (const char* name : {"oom.pickle", "synthetic_annotated.pickle.gz", "two_devices.pickle"}) {
    Snapshot snap = read_snapshot_file(kData + "/" + name);
    HtmlOptions opts;
    opts.source_name = name;
    std::string blob = render_page_data(snap, opts);
    std::string pieces;
    opts.column_sink = [&](std::string_view s) { pieces += s; };
    std::string head = render_page_data(snap, opts);
    EXPECT_LT(head.size(), blob.size()) << name;
    EXPECT_EQ(head + pieces, blob) << name;
  }
}

}  // namespace
}  // namespace memsight
