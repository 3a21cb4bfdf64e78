// The profiler pages: the per-step report with memory curves, and torch's
// categorised memory timeline, each one self-contained HTML file (the
// viewer's profile_page.html with profile_app.js, data as JSON).
#include <algorithm>
#include <unordered_map>

#include "memsight/error.h"
#include "memsight/html.h"
#include "memsight/profile.h"
#include "report/bundle.h"
#include "util/json_writer.h"

namespace memsight {

const char* const kTimelineCategories[8] = {"parameter",       "optimizer state", "input",
                                            "temporary",       "activation",      "gradient",
                                            "autograd detail", "unknown"};

namespace {

// Times in µs to the nanosecond.
constexpr int kUsDecimals = 3;

template <typename T, typename F>
void json_list(JsonWriter& w, const std::vector<T>& v, F&& f) {
  w.begin_array();
  for (const T& x : v) f(x);
  w.end_array();
}

std::string render_page(const std::string& title, const std::string& data) {
  return render_json_page("profile_page.html", "profile_bundle.txt", title, data);
}

// The report as the page reads it: the same numbers as profile_json, laid
// out as arrays with names interned once ("strings"), so that a trace of
// 200,000 steps makes a page a fifth the size that parses in a fraction of
// the time (viewer/src/profile_app.js, expandStep, reads it back). Times are
// as short as they read ("9", "1.5", "4421890447690.058").
//   step: [number|null, occurrence, occurrences, ts_us, dur_us, devices, top_ops, top_kernels]
//   device: [device, peak_allocated, peak_reserved, allocs, alloc_bytes, frees, free_bytes,
//            live_at_peak, allocated_most];  op row: [op, stack, bytes, count]
//   time row: [name, total_us, count]
class PageReport {
 public:
  explicit PageReport(JsonWriter& w) : w_(w) {}
  void json(const ProfileReport& r) {
    w_.begin_object()
        .field("events", r.events)
        .field("has_memory", r.has_memory)
        .field("has_stacks", r.has_stacks)
        .key("input_notes");
    r.notes.json(w_);
    w_.key("steps");
    json_list(w_, r.steps, [&](const ProfileStep& s) { step(s); });
    w_.key("strings");
    json_list(w_, strings_, [&](const std::string* t) { w_.value(*t); });
    w_.end_object();
  }

 private:
  void step(const ProfileStep& s) {
    w_.begin_array();
    if (s.step < 0)
      w_.null();
    else
      w_.value(s.step);
    w_.value(s.occurrence)
        .value(s.occurrences)
        .short_fixed(s.ts, kUsDecimals)
        .short_fixed(s.dur, kUsDecimals);
    json_list(w_, s.devices, [&](const StepDevice& d) {
      w_.begin_array().value(d.device);
      for (int64_t v :
           {d.peak_allocated, d.peak_reserved, d.allocs, d.alloc_bytes, d.frees, d.free_bytes})
        w_.value(v);
      op_rows(d.live_at_peak);
      op_rows(d.allocated_most);
      w_.end_array();
    });
    time_rows(s.top_ops);
    time_rows(s.top_kernels);
    w_.end_array();
  }
  size_t id(const std::string& s) {
    auto [it, added] = index_.try_emplace(s, strings_.size());
    if (added) strings_.push_back(&it->first);
    return it->second;
  }
  void op_rows(const std::vector<OpBytes>& rows) {
    json_list(w_, rows, [&](const OpBytes& b) {
      // The stack is interned before the op, as pages have always numbered them.
      const size_t stack = id(b.stack);
      w_.begin_array().value(id(b.op)).value(stack).value(b.bytes).value(b.count).end_array();
    });
  }
  void time_rows(const std::vector<NameTime>& rows) {
    json_list(w_, rows, [&](const NameTime& t) {
      w_.begin_array().value(id(t.name)).short_fixed(t.total_us, kUsDecimals).value(t.count);
      w_.end_array();
    });
  }
  JsonWriter& w_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<const std::string*> strings_;
};

}  // namespace

std::string profile_html(const ProfileReport& r, const std::string& title) {
  std::string data;
  JsonWriter w(data);
  w.begin_document()
      .field("kind", "profile")
      .field("title", title)
      .fixed_field("t0", r.t0, kUsDecimals)
      .key("deviceNames");
  json_list(w, r.device_names, [&](const std::string& s) { w.value(s); });
  w.key("curves");
  json_list(w, r.curves, [&](const ProfileReport::Curve& c) {
    w.begin_object().field("device", c.device).key("ts");
    json_list(w, c.ts, [&](double v) { w.short_fixed(v - r.t0, kUsDecimals); });
    w.key("allocated");
    json_list(w, c.allocated, [&](int64_t v) { w.value(v); });
    w.key("reserved");
    json_list(w, c.reserved, [&](int64_t v) { w.value(v); });
    w.end_object();
  });
  w.key("report");
  PageReport(w).json(r);
  w.end_object();
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
  std::string data;
  JsonWriter w(data);
  w.begin_document()
      .field("kind", "timeline")
      .field("title", title)
      .field("device", t.device)
      .key("categories")
      .begin_array();
  for (const char* c : kTimelineCategories) w.value(c);
  w.end_array().key("ts");
  json_list(w, keep, [&](size_t i) { w.fixed(t.ts[i] - t0, kUsDecimals); });
  w.key("series").begin_array();
  for (size_t c = 0; c < 8; ++c) json_list(w, keep, [&](size_t i) { w.value(t.bytes[c][i]); });
  w.end_array().field("peak", keep.empty() ? int64_t{-1} : static_cast<int64_t>(peak));
  w.key("input_notes");
  t.notes.json(w);
  w.end_object();
  return render_page(title, data);
}

}  // namespace memsight
