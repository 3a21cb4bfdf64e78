// The profiler pages: the per-step report with memory curves, and torch's
// categorised memory timeline, each one self-contained HTML file (the
// viewer's profile_page.html with profile_app.js, data as JSON).
#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "memsight/error.h"
#include "memsight/html.h"
#include "memsight/profile.h"
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

namespace {

// A number of µs as short as it reads: "9", "1.5", "4421890447690.058".
std::string micros(double v) {
  std::string s = dbl(v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

// The report as the page reads it: the same numbers as profile_json, laid
// out as arrays with names interned once ("strings"), so that a trace of
// 200,000 steps makes a page a fifth the size that parses in a fraction of
// the time (viewer/src/profile_app.js, expandStep, reads it back).
//   step: [number|null, occurrence, occurrences, ts_us, dur_us, devices, top_ops, top_kernels]
//   device: [device, peak_allocated, peak_reserved, allocs, alloc_bytes, frees, free_bytes,
//            live_at_peak, allocated_most];  op row: [op, stack, bytes, count]
//   time row: [name, total_us, count]
class PageReport {
 public:
  std::string json(const ProfileReport& r) {
    std::string out = "{\"events\":" + std::to_string(r.events) +
                      ",\"has_memory\":" + (r.has_memory ? "true" : "false") +
                      ",\"has_stacks\":" + (r.has_stacks ? "true" : "false") +
                      ",\"input_notes\":" + r.notes.json() + ",\"steps\":";
    json_list(out, r.steps, [&](std::string& o, const ProfileStep& s) {
      o += '[' + (s.step < 0 ? std::string("null") : std::to_string(s.step)) + ',' +
           std::to_string(s.occurrence) + ',' + std::to_string(s.occurrences) + ',' + micros(s.ts) +
           ',' + micros(s.dur) + ',';
      json_list(o, s.devices, [&](std::string& x, const StepDevice& d) {
        x += '[' + std::to_string(d.device);
        for (int64_t v :
             {d.peak_allocated, d.peak_reserved, d.allocs, d.alloc_bytes, d.frees, d.free_bytes})
          x += ',' + std::to_string(v);
        x += ',';
        op_rows(x, d.live_at_peak);
        x += ',';
        op_rows(x, d.allocated_most);
        x += ']';
      });
      o += ',';
      time_rows(o, s.top_ops);
      o += ',';
      time_rows(o, s.top_kernels);
      o += ']';
    });
    out += ",\"strings\":";
    json_list(out, strings_,
              [](std::string& o, const std::string* t) { append_json_string(o, *t); });
    return out + "}";
  }

 private:
  size_t id(const std::string& s) {
    auto [it, added] = index_.try_emplace(s, strings_.size());
    if (added) strings_.push_back(&it->first);
    return it->second;
  }
  void op_rows(std::string& o, const std::vector<OpBytes>& rows) {
    json_list(o, rows, [&](std::string& x, const OpBytes& b) {
      x += '[' + std::to_string(id(b.op)) + ',' + std::to_string(id(b.stack)) + ',' +
           std::to_string(b.bytes) + ',' + std::to_string(b.count) + ']';
    });
  }
  void time_rows(std::string& o, const std::vector<NameTime>& rows) {
    json_list(o, rows, [&](std::string& x, const NameTime& t) {
      x += '[' + std::to_string(id(t.name)) + ',' + micros(t.total_us) + ',' +
           std::to_string(t.count) + ']';
    });
  }
  std::unordered_map<std::string, size_t> index_;
  std::vector<const std::string*> strings_;
};

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
    json_list(o, c.ts, [&](std::string& x, double v) { x += micros(v - r.t0); });
    o += ",\"allocated\":";
    json_list(o, c.allocated, [](std::string& x, int64_t v) { x += std::to_string(v); });
    o += ",\"reserved\":";
    json_list(o, c.reserved, [](std::string& x, int64_t v) { x += std::to_string(v); });
    o += '}';
  });
  data += ",\"report\":" + PageReport().json(r) + "}";
  return render_page(title, data);
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
  data += "],\"peak\":" + std::to_string(keep.empty() ? -1 : static_cast<int64_t>(peak));
  data += ",\"input_notes\":" + t.notes.json() + "}";
  return render_page(title, data);
}

}  // namespace memsight
