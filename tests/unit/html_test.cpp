// render_html and the page data behind it: a complete offline document, the
// embedded columns decode to what the engine packed, and the timeline and
// allocator-state data agree with a plain replay of each fixture's trace.
#include "memsight/html.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "memsight/error.h"
#include "memsight/reader.h"
#include "report/page_data.h"
#include "report/page_pack.h"
#include "test_data.h"

#ifndef MEMSIGHT_TEST_DATA
#define MEMSIGHT_TEST_DATA "tests/data"
#endif

namespace memsight {
namespace {

std::vector<std::string> fixtures() {
  std::vector<std::string> out;
  for (const auto& name : test::fixture_names())
    out.push_back(std::string(MEMSIGHT_TEST_DATA) + "/" + name + ".pickle");
  return out;
}

std::string unbase64(std::string_view s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = val(c);
    if (v < 0) continue;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

std::string inflate_all(std::string_view z) {
  std::string out(1 << 16, '\0');
  z_stream s{};
  inflateInit(&s);
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  s.avail_in = static_cast<uInt>(z.size());
  int rc;
  do {
    if (s.total_out == out.size()) out.resize(out.size() * 2);
    s.next_out = reinterpret_cast<Bytef*>(out.data() + s.total_out);
    s.avail_out = static_cast<uInt>(out.size() - s.total_out);
    rc = inflate(&s, Z_NO_FLUSH);
  } while (rc == Z_OK);
  EXPECT_EQ(rc, Z_STREAM_END);
  out.resize(s.total_out);
  inflateEnd(&s);
  return out;
}

// The blob embedded in a page, decompressed.
std::string page_blob(const std::string& html) {
  const std::string open = "<script id=\"memsight-data\"";
  size_t a = html.find(open);
  EXPECT_NE(a, std::string::npos);
  bool deflate = html.compare(html.find("data-encoding=\"", a) + 15, 7, "deflate") == 0;
  size_t b = html.find('>', a) + 1;
  size_t e = html.find("</script>", b);
  std::string payload = html.substr(b, e - b), raw;
  size_t p = 0;
  while (p <= payload.size()) {
    size_t q = payload.find('.', p);
    if (q == std::string::npos) q = payload.size();
    std::string bytes = unbase64(std::string_view(payload).substr(p, q - p));
    raw += deflate ? inflate_all(bytes) : bytes;
    p = q + 1;
  }
  return raw;
}

TEST(Html, FixturesRenderCompleteOfflinePages) {
  for (const auto& path : fixtures()) {
    SCOPED_TRACE(path);
    Snapshot snap = read_snapshot_file(path);
    for (const char* view : {"overview", "timeline", "segments-timeline", "state", "flamegraph"}) {
      HtmlOptions o;
      o.view = view;
      o.title = "<b>&\"title\"";
      std::string html = render_html(snap, o);
      EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
      EXPECT_NE(html.find("</html>"), std::string::npos);
      EXPECT_NE(html.find("&lt;b&gt;&amp;&quot;title&quot;"), std::string::npos);
      EXPECT_EQ(html.find("{{"), std::string::npos) << "a template marker is left";
      EXPECT_EQ(html.find("http://"), std::string::npos)
          << "the page must not refer to the network";
      EXPECT_EQ(html.find("https://"), std::string::npos)
          << "the page must not refer to the network";
      EXPECT_EQ(html.find("\nimport "), std::string::npos) << "module syntax left in the bundle";
      EXPECT_EQ(html.find("\nexport "), std::string::npos) << "module syntax left in the bundle";
      std::string raw = page_blob(html);
      ASSERT_GE(raw.size(), 8u);
      EXPECT_EQ(raw.substr(0, 4), "MSV1");
      EXPECT_NE(raw.find(std::string("\"view\":\"") + view + "\""), std::string::npos);
      EXPECT_EQ(raw.size() % 8, 0u);
    }
    HtmlOptions plain;
    plain.compress = false;
    EXPECT_EQ(page_blob(render_html(snap, plain)), page_blob(render_html(snap, {})));
  }
}

TEST(Html, EmptySnapshotsRender) {
  // {'segments': [], 'device_traces': []} and a bare (legacy) empty segment list.
  // Lengths come from the arrays: the literals contain NUL bytes.
  static constexpr char kDict[] =
      "\x80\x02\x7d\x71\x00\x28\x58\x08\x00\x00\x00"
      "segments"
      "\x71\x01\x5d\x71\x02\x58\x0d\x00\x00\x00"
      "device_traces"
      "\x71\x03\x5d\x71\x04\x75\x2e";
  static constexpr char kList[] = "\x80\x02\x5d\x71\x00\x2e";
  const std::string dict(kDict, sizeof kDict - 1);
  const std::string list(kList, sizeof kList - 1);
  for (const std::string& bytes : {dict, list}) {
    Snapshot snap = read_snapshot_bytes(bytes);
    std::string raw = page_blob(render_html(snap, {}));
    EXPECT_EQ(raw.substr(0, 4), "MSV1");
    EXPECT_NE(raw.find("\"devices\":[{\"index\":0,\"events\":0"), std::string::npos);
  }
}

TEST(Html, EmptyDevicesCostBytes) {
  // {'segments': [], 'device_traces': [[]] * n}: the page leaves the empty
  // devices out (only the default one is packed), so 10,000 of them cost
  // what one does, plus the digits of meta.deviceCount.
  auto page_of = [](size_t n) {
    static constexpr char kHead[] =
        "\x80\x02}(X\x08\0\0\0segments]X\x0d\0\0\0"
        "device_traces](";
    std::string bytes(kHead, sizeof kHead - 1);  // the literal holds NUL bytes
    bytes += std::string(n, ']');
    bytes += "eu.";
    HtmlOptions o;
    o.compress = false;
    return page_blob(render_html(read_snapshot_bytes(bytes), o));
  };
  const std::string one = page_of(1), many = page_of(10000);
  EXPECT_NE(many.find("\"deviceCount\":10000"), std::string::npos);
  EXPECT_NE(many.find("\"devices\":[{\"index\":0,"), std::string::npos);
  EXPECT_EQ(many.find("{\"index\":1,"), std::string::npos) << "an empty device was packed";
  EXPECT_LE(many.size(), one.size() + 16);
}

// Devices with something on them are packed into shared columns: 20,000
// devices of one allocation each make some 120 columns (each with its
// parts' lengths), not 1.2 million.
TEST(Html, ManyDevicesShareColumns) {
  auto page_of = [](size_t n) {
    static constexpr char kHead[] =
        "\x80\x02}(X\x08\0\0\0segments]X\x0d\0\0\0"
        "device_traces](";
    static constexpr char kEntry[] =
        "](}(X\x06\0\0\0actionX\x05\0\0\0allocX\x04\0\0\0addrM\0\x10X\x04\0\0\0size"
        "M\0\x02X\x06\0\0\0streamK\0X\x07\0\0\0time_usK\x01ue";
    std::string bytes(kHead, sizeof kHead - 1);
    for (size_t i = 0; i < n; ++i) bytes.append(kEntry, sizeof kEntry - 1);
    bytes += "eu.";
    HtmlOptions o;
    o.compress = false;
    return page_blob(render_html(read_snapshot_bytes(bytes), o));
  };
  const std::string one = page_of(1), many = page_of(20000);
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
  };
  // The page holds the kPageDevices busiest (all alike here: the first
  // ones), their columns shared, and their one summary once.
  EXPECT_NE(many.find("{\"index\":63,\"events\":1,"), std::string::npos);
  EXPECT_EQ(many.find("{\"index\":64,"), std::string::npos);
  EXPECT_NE(many.find("\"devicesWithData\":20000"), std::string::npos);
  EXPECT_NE(many.find("\"alike\":[[0,63]]"), std::string::npos);
  EXPECT_EQ(count(many, "\"dev."), count(one, "\"dev."));
  // About 910 bytes a device (its metadata, with its memory kinds, 530;
  // its leak report, 380); 3,140 with columns and a summary of its own.
  EXPECT_LE(many.size(), one.size() + kPageDevices * 1000) << many.size();
}

TEST(Html, RejectsUnknownViews) {
  Snapshot snap = read_snapshot_file(fixtures().front());
  HtmlOptions o;
  o.view = "nope";
  EXPECT_THROW(render_html(snap, o), Error);
  EXPECT_TRUE(is_html_view("state"));
  EXPECT_FALSE(is_html_view("Allocator State History"));
  EXPECT_FALSE(viewer_asset("page.html").empty());
  EXPECT_TRUE(viewer_asset("no-such-file").empty());
}

// Reads one column back from a packed blob, whatever its encoding.
std::vector<double> column(const std::string& blob, const std::string& name) {
  uint32_t hl = static_cast<uint8_t>(blob[4]) | static_cast<uint8_t>(blob[5]) << 8 |
                static_cast<uint8_t>(blob[6]) << 16 |
                static_cast<uint32_t>(static_cast<uint8_t>(blob[7])) << 24;
  std::string header = blob.substr(8, hl);
  size_t base = 8 + hl;
  size_t at = header.find("\"" + name + "\":[");
  EXPECT_NE(at, std::string::npos) << name;
  std::string spec =
      header.substr(at + name.size() + 4, header.find(']', at) - at - name.size() - 4);
  std::vector<std::string> f;
  for (size_t p = 0; p <= spec.size();) {
    size_t q = spec.find(',', p);
    if (q == std::string::npos) q = spec.size();
    std::string t = spec.substr(p, q - p);
    if (!t.empty() && t.front() == '"') t = t.substr(1, t.size() - 2);
    f.push_back(t);
    p = q + 1;
  }
  auto read = [&](const std::string& type, size_t off, size_t count) {
    std::vector<double> v(count);
    const char* d = blob.data() + base + off;
    for (size_t i = 0; i < count; ++i) {
      if (type == "u8") v[i] = reinterpret_cast<const uint8_t*>(d)[i];
      if (type == "i8") v[i] = reinterpret_cast<const int8_t*>(d)[i];
      if (type == "u16") v[i] = reinterpret_cast<const uint16_t*>(d)[i];
      if (type == "i16") v[i] = reinterpret_cast<const int16_t*>(d)[i];
      if (type == "u32") v[i] = reinterpret_cast<const uint32_t*>(d)[i];
      if (type == "i32") v[i] = reinterpret_cast<const int32_t*>(d)[i];
      if (type == "f64") v[i] = reinterpret_cast<const double*>(d)[i];
    }
    return v;
  };
  if (f[0] == "const") return std::vector<double>(std::stoul(f[1]), std::stod(f[2]));
  if (f[0] == "dict") {
    auto idx = read(f[2], std::stoul(f[3]), std::stoul(f[1]));
    auto val = read(f[4], std::stoul(f[5]), std::stoul(f[6]));
    for (double& x : idx) x = val[static_cast<size_t>(x)];
    return idx;
  }
  if (f[0] == "exc") {
    auto v = read(f[2], std::stoul(f[3]), std::stoul(f[1]));
    auto at2 = read(f[4], std::stoul(f[5]), std::stoul(f[8]));
    auto val = read(f[6], std::stoul(f[7]), std::stoul(f[8]));
    for (size_t k = 0; k < at2.size(); ++k) v[static_cast<size_t>(at2[k])] = val[k];
    return v;
  }
  return read(f[0], std::stoul(f[1]), std::stoul(f[2]));
}

TEST(PagePack, EveryEncodingRoundTrips) {
  report::PagePacker p;
  std::vector<int64_t> small = {1, 2, 3, 255, 0}, negative = {-1, 5, -300, 7};
  std::vector<int64_t> same(100, 42), addresses, deltas, wide = {1, int64_t{1} << 40};
  for (int i = 0; i < 5000; ++i) addresses.push_back(0x7f0000000000 + (i % 37) * 512);
  for (int i = 0; i < 5000; ++i) deltas.push_back(i % 97 == 0 ? 1000000 + i : i % 251);
  p.ints("small", small);
  p.ints("negative", negative);
  p.ints("same", same);
  p.ints("addresses", addresses);
  p.ints("deltas", deltas);
  p.ints("wide", wide);
  p.ints("empty", std::vector<int64_t>{});
  std::string blob = p.finish("{}");
  EXPECT_EQ(blob.substr(0, 4), "MSV1");
  auto eq = [&](const std::string& name, const std::vector<int64_t>& want) {
    auto got = column(blob, name);
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i], static_cast<double>(want[i])) << name << i;
  };
  eq("small", small);
  eq("negative", negative);
  eq("same", same);
  eq("addresses", addresses);
  eq("deltas", deltas);
  eq("wide", wide);
  eq("empty", {});
  EXPECT_NE(blob.find("\"same\":[\"const\",100,42]"), std::string::npos);
  EXPECT_NE(blob.find("\"addresses\":[\"dict\""), std::string::npos);
  EXPECT_NE(blob.find("\"deltas\":[\"exc\""), std::string::npos);
  // Base64 of every length, and pieces that split and join.
  for (std::string s : {"", "a", "ab", "abc", "abcd"}) EXPECT_EQ(unbase64(report::base64(s)), s);
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>(i);
  std::string joined = report::deflate_base64(big, 4), back;
  for (size_t p0 = 0; p0 <= joined.size();) {
    size_t q = joined.find('.', p0);
    if (q == std::string::npos) q = joined.size();
    back += inflate_all(unbase64(joined.substr(p0, q - p0)));
    p0 = q + 1;
  }
  EXPECT_EQ(back, big);
  EXPECT_GT(std::count(joined.begin(), joined.end(), '.'), 0);
}

// A plain replay of the page's events: which timeline elements are live
// after each event, and the allocator state after each event.
TEST(PageData, TimelineAndStateAgreeWithAPlainReplay) {
  for (const auto& path : fixtures()) {
    SCOPED_TRACE(path);
    Snapshot snap = read_snapshot_file(path);
    report::Annotated ann = report::annotate(snap);
    for (size_t d = 0; d < ann.devices; ++d) {
      const auto& ev = ann.events[d];
      size_t n = ev.row.size();
      // Pairs of free_requested + free_completed became one "free".
      size_t frees = std::count(ev.action.begin(), ev.action.end(), report::PageAction::Free);
      auto [rb, re] = snap.device_rows(d);
      EXPECT_EQ(n + frees, re - rb);
      for (bool segs : {false, true}) {
        report::Timeline tl = report::build_timeline(snap, ann, d, segs, 16);
        size_t m = tl.kind.size();
        double total = 0, peak = 0;
        std::vector<uint32_t> live;
        for (uint32_t e = 0; e < tl.initial; ++e) {
          EXPECT_NE(tl.kind[e], report::ElementKind::Alloc);
          total += tl.size[e];
          live.push_back(e);
        }
        peak = total;
        size_t k = 0;
        for (size_t i = 0; i < n; ++i) {
          for (uint32_t e = tl.initial; e < m; ++e)
            if (tl.src[e] == static_cast<int32_t>(i)) live.push_back(e), total += tl.size[e];
          for (uint32_t e = 0; e < m; ++e)
            if (tl.end[e] == static_cast<int32_t>(i)) {
              live.erase(std::find(live.begin(), live.end(), e));
              total -= tl.size[e];
            }
          peak = std::max(peak, total);
          if ((i + 1) % tl.cp_interval == 0 && i + 1 < n) {
            std::vector<uint32_t> cp(tl.cp_ids.begin() + tl.cp_off[k],
                                     tl.cp_ids.begin() + tl.cp_off[k + 1]);
            EXPECT_EQ(cp, live) << "checkpoint " << k;
            ++k;
          }
        }
        EXPECT_EQ(k + 1, tl.cp_off.size());
        EXPECT_EQ(peak, tl.peak);
        EXPECT_EQ(total, tl.final_total);
        std::set<uint32_t> order(tl.by_size.begin(), tl.by_size.end());
        EXPECT_EQ(order.size(), m);
      }
      // State checkpoints: each one undone the rest of the way to the start
      // must reach the same state as undoing from the snapshot directly.
      report::StateCheckpoints a = report::build_state_checkpoints(snap, ann, d, 7);
      report::StateCheckpoints b = report::build_state_checkpoints(snap, ann, d, 14);
      // Where both hold the state after one event (past checkpoint_budget
      // an interval doubles, so 7 and 14 may have become other multiples).
      for (size_t kb = 0; kb + 1 < b.seg_off.size(); ++kb) {
        const size_t after = size_t{b.cp_interval} * (kb + 1);
        if (after % a.cp_interval) continue;
        const size_t ka = after / a.cp_interval - 1;
        ASSERT_LT(ka + 1, a.seg_off.size());
        EXPECT_EQ(std::vector<int32_t>(a.blk_src.begin() + a.blk_off[ka],
                                       a.blk_src.begin() + a.blk_off[ka + 1]),
                  std::vector<int32_t>(b.blk_src.begin() + b.blk_off[kb],
                                       b.blk_src.begin() + b.blk_off[kb + 1]));
        EXPECT_EQ(std::vector<double>(a.seg_size.begin() + a.seg_off[ka],
                                      a.seg_size.begin() + a.seg_off[ka + 1]),
                  std::vector<double>(b.seg_size.begin() + b.seg_off[kb],
                                      b.seg_size.begin() + b.seg_off[kb + 1]));
      }
    }
  }
}

// 3,000 allocations, then their frees, a checkpoint after every event: the
// checkpoints held 9 million live elements (the square of what is live,
// issue 34's `released` axis of view); past checkpoint_budget every other
// one goes and the interval doubles, each left still the state after its
// event.
TEST(PageData, CheckpointsStayWithinTheirBudget) {
  auto str = [](std::string_view t) {
    std::string o = "X";
    for (int i = 0; i < 4; ++i) o += static_cast<char>((t.size() >> (8 * i)) & 0xff);
    return o + std::string(t);
  };
  auto int4 = [](int64_t v) {
    std::string o = "J";
    for (int i = 0; i < 4; ++i) o += static_cast<char>((v >> (8 * i)) & 0xff);
    return o;
  };
  constexpr size_t kAllocs = 3000;
  auto entry = [&](const char* action, size_t i, size_t t) {
    return "}(" + str("action") + str(action) + str("addr") + int4(4096 * (i + 1)) + str("size") +
           int4(512) + str("stream") + int4(0) + str("time_us") + int4(t) + str("frames") + "]u";
  };
  std::string p = "\x80\x02}(" + str("segments") + "]" + str("device_traces") + "]](";
  for (size_t i = 0; i < kAllocs; ++i) p += entry("alloc", i, i);
  for (size_t i = 0; i < kAllocs; ++i)
    p += entry("free_requested", i, kAllocs + i) + entry("free_completed", i, kAllocs + i);
  p += "eau.";
  Snapshot snap = read_snapshot_bytes(p);
  report::Annotated ann = report::annotate(snap);
  const size_t n = ann.events[0].row.size();
  ASSERT_EQ(n, 2 * kAllocs);  // each free one event
  // Live after event e: the allocations so far, less the frees.
  auto live = [&](size_t k, uint32_t interval) {
    const size_t e = (k + 1) * interval - 1;
    return std::min(e + 1, n - 1 - e);
  };
  const size_t budget = report::checkpoint_budget(n);
  report::Timeline tl = report::build_timeline(snap, ann, 0, false, 1);
  EXPECT_LE(tl.cp_ids.size(), budget);
  EXPECT_GT(tl.cp_off.size(), 2u);
  EXPECT_EQ(tl.cp_interval & (tl.cp_interval - 1), 0u);  // doubled from 1
  for (size_t k = 0; k + 1 < tl.cp_off.size(); ++k)
    EXPECT_EQ(tl.cp_off[k + 1] - tl.cp_off[k], live(k, tl.cp_interval)) << k;
  report::StateCheckpoints sc = report::build_state_checkpoints(snap, ann, 0, 1);
  EXPECT_LE(sc.seg_src.size() + sc.blk_src.size(), budget);
  EXPECT_GT(sc.blk_off.size(), 2u);
  EXPECT_EQ(sc.cp_interval & (sc.cp_interval - 1), 0u);
  for (size_t k = 0; k + 1 < sc.blk_off.size(); ++k)
    EXPECT_EQ(sc.blk_off[k + 1] - sc.blk_off[k], live(k, sc.cp_interval)) << k;
}

}  // namespace
}  // namespace memsight
