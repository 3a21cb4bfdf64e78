// The profiler pages: the per-step report with memory curves, and torch's
// categorised memory timeline, each one self-contained HTML file (the
// viewer's profile_page.html with profile_app.js, data as JSON).
#include <algorithm>
#include <cstdio>

#include "memsight/error.h"
#include "memsight/html.h"
#include "memsight/profile.h"
#include "pickle/input_kind.h"
#include "pickle/source.h"
#include "profile/json_stream.h"
#include "report/bundle.h"
#include "util/escape.h"

namespace memsight {

const char* const kTimelineCategories[8] = {"parameter",       "optimizer state", "input",
                                            "temporary",       "activation",      "gradient",
                                            "autograd detail", "unknown"};

namespace {

std::string dbl(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

template <typename T, typename F>
void json_list(std::string& out, const std::vector<T>& v, F&& f) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    f(out, v[i]);
  }
  out += ']';
}

std::string render_page(const std::string& title, const std::string& data) {
  return render_json_page("profile_page.html", "profile_bundle.txt", title, data);
}

}  // namespace

std::string profile_html(const ProfileReport& r, const std::string& title) {
  std::string data = "{\"kind\":\"profile\",\"title\":";
  append_json_string(data, title);
  data += ",\"t0\":" + dbl(r.t0) + ",\"deviceNames\":";
  json_list(data, r.device_names,
            [](std::string& o, const std::string& s) { append_json_string(o, s); });
  data += ",\"curves\":";
  json_list(data, r.curves, [&](std::string& o, const ProfileReport::Curve& c) {
    o += "{\"device\":" + std::to_string(c.device) + ",\"ts\":";
    json_list(o, c.ts, [&](std::string& x, double v) { x += dbl(v - r.t0); });
    o += ",\"allocated\":";
    json_list(o, c.allocated, [](std::string& x, int64_t v) { x += std::to_string(v); });
    o += ",\"reserved\":";
    json_list(o, c.reserved, [](std::string& x, int64_t v) { x += std::to_string(v); });
    o += '}';
  });
  std::string report = profile_json(r);
  while (!report.empty() && report.back() == '\n') report.pop_back();
  data += ",\"report\":" + report + "}";
  return render_page(title, data);
}

namespace {

MemoryTimeline read_timeline(ByteSource& src) {
  json::Reader r(src);
  auto bad = [] {
    throw Error(
        "not a torch memory timeline (export_memory_timeline's .json, .json.gz or .raw.json.gz)");
  };
  // Either [times, [[9 sizes], ...]] or [[t_ns, action, bytes, category], ...].
  std::vector<std::vector<double>> lists;
  std::vector<std::vector<int64_t>> sizes;
  if (r.peek() != json::Kind::Array) bad();
  r.begin_array();
  while (r.next_item()) {
    if (r.peek() != json::Kind::Array) bad();
    r.begin_array();
    std::vector<double> nums;
    while (r.next_item()) {
      if (r.peek() == json::Kind::Array) {
        std::vector<int64_t> row;
        r.begin_array();
        while (r.next_item()) row.push_back(r.integer());
        if (row.size() != 9) throw Error("memory timeline: a row of sizes does not hold 9 values");
        sizes.push_back(std::move(row));
      } else {
        nums.push_back(r.number());
      }
    }
    lists.push_back(std::move(nums));
  }
  r.finish();
  MemoryTimeline t;
  t.bytes.assign(8, {});
  if (!sizes.empty() || (lists.size() == 2 && lists[0].empty() && lists[1].empty())) {
    if (lists.size() != 2 || lists[0].size() != sizes.size() || !lists[1].empty()) bad();
    t.ts = lists[0];
    for (const auto& row : sizes)
      for (size_t c = 0; c < 8; ++c) t.bytes[c].push_back(row[c + 1]);
    return t;
  }
  // Raw records: bytes per category added up, one row per distinct time;
  // memory that existed before the profile (t = -1) counts from the first time.
  double t_first = -1;
  for (const auto& rec : lists) {
    if (rec.size() != 4) bad();
    if (rec[0] >= 0 && (t_first < 0 || rec[0] < t_first)) t_first = rec[0];
  }
  auto when = [&](const std::vector<double>& rec) {
    return (rec[0] < 0 ? std::max(0.0, t_first) : rec[0]) / 1000.0;
  };
  int64_t cur[8] = {};
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& rec = lists[i];
    cur[static_cast<size_t>(std::clamp<double>(rec[3], 0, 7))] += static_cast<int64_t>(rec[2]);
    if (i + 1 < lists.size() && when(lists[i + 1]) == when(rec)) continue;
    t.ts.push_back(when(rec));
    for (size_t c = 0; c < 8; ++c) t.bytes[c].push_back(cur[c]);
  }
  return t;
}

}  // namespace

MemoryTimeline read_memory_timeline(const std::string& path) {
  return read_named(path,
                    [&] { return read_timeline(*open_input(path, InputKind::MemoryTimeline)); });
}

MemoryTimeline read_memory_timeline_bytes(std::string_view data) {
  auto src = memory_source(data);
  expect_input(src->head(), InputKind::MemoryTimeline, "");
  return read_timeline(*src);
}

std::string timeline_html(const MemoryTimeline& t, const std::string& title) {
  // At most ~5000 points: each bucket keeps its highest total, so the peak survives.
  size_t n = t.ts.size(), bucket = std::max<size_t>(1, n / 5000 + 1), peak = 0;
  std::vector<size_t> keep;
  int64_t best_total = -1;
  auto total = [&](size_t i) {
    int64_t s = 0;
    for (const auto& c : t.bytes) s += c[i];
    return s;
  };
  for (size_t k = 0; k < n; k += bucket) {
    size_t best = k;
    for (size_t q = k; q < std::min(n, k + bucket); ++q)
      if (total(q) > total(best)) best = q;
    keep.push_back(best);
    if (total(best) > best_total) {
      best_total = total(best);
      peak = keep.size() - 1;
    }
  }
  double t0 = n ? t.ts[0] : 0;
  std::string data = "{\"kind\":\"timeline\",\"title\":";
  append_json_string(data, title);
  data += ",\"device\":";
  append_json_string(data, t.device);
  data += ",\"categories\":[";
  for (size_t c = 0; c < 8; ++c) {
    if (c) data += ',';
    append_json_string(data, kTimelineCategories[c]);
  }
  data += "],\"ts\":";
  json_list(data, keep, [&](std::string& o, size_t i) { o += dbl(t.ts[i] - t0); });
  data += ",\"series\":[";
  for (size_t c = 0; c < 8; ++c) {
    if (c) data += ',';
    json_list(data, keep, [&](std::string& o, size_t i) { o += std::to_string(t.bytes[c][i]); });
  }
  data += "],\"peak\":" + std::to_string(keep.empty() ? -1 : static_cast<int64_t>(peak)) + "}";
  return render_page(title, data);
}

}  // namespace memsight
