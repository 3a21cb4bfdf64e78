// ranks_json: every number of every rank, the medians, the differences, the
// OOM verdicts and what does not match (docs/formats.md, "memsight ranks
// --json").
#include "memsight/ranks.h"
#include "util/json_writer.h"

namespace memsight {
namespace {

constexpr int kShareDecimals = 6;  // fragmentation, as summary writes it
constexpr int64_t kMissingListed = 1000;

void strings(JsonWriter& w, std::string_view k, const std::vector<std::string>& v) {
  w.key(k).begin_array();
  for (const std::string& s : v) w.value(s);
  w.end_array();
}

// A list of objects: item(w, element) writes the object's keys.
template <typename T, typename F>
void objects(JsonWriter& w, std::string_view k, const std::vector<T>& v, F&& item) {
  w.key(k).begin_array();
  for (const T& x : v) {
    w.begin_object();
    item(w, x);
    w.end_object();
  }
  w.end_array();
}

void kinds(JsonWriter& w, std::string_view k, const KindBytes& b) {
  w.key(k).begin_object();
  for (size_t c = 0; c < kCategoryCount; ++c) w.field(category_key(static_cast<Category>(c)), b[c]);
  w.end_object();
}

void peak(JsonWriter& w, std::string_view k, int64_t bytes, int64_t event, int64_t time_us) {
  w.key(k)
      .begin_object()
      .field("bytes", bytes)
      .field("event", event)
      .field("time_us", time_us)
      .end_object();
}

void origin(JsonWriter& w, const RankOrigin& o) {
  w.key("origin")
      .begin_object()
      .field("rank", o.rank)
      .field("world_size", o.world_size)
      .field("local_rank", o.local_rank)
      .field("seq", o.seq)
      .field("origin_rank", o.origin_rank)
      .field("batch", o.batch)
      .field("pid", o.pid)
      .field("device_total", o.device_total)
      .fixed_field("time", o.time, kShareDecimals)
      .field("tag", o.tag)
      .field("reason", o.reason)
      .field("host", o.host)
      .field("torch", o.torch_version)
      .field("device_name", o.device_name)
      .field("job", o.job)
      .end_object();
}

void oom(JsonWriter& w, const RankOom& o) {
  w.field("event", o.event)
      .field("time_us", o.time_us)
      .field("requested", o.requested)
      .field("allocated", o.allocated)
      .field("reserved", o.reserved)
      .field("device_free", o.device_free)
      .field("pool", o.pool)
      .field("site", o.site)
      .field("verdict", o.verdict);
  strings(w, "causes", o.causes);
  w.field("explanation", o.explanation);
  strings(w, "remedies", o.remedies);
  kinds(w, "kinds", o.kinds);
}

void at_dump(JsonWriter& w, const RankSummary& r) {
  w.key("at_dump")
      .begin_object()
      .field("allocated", r.allocated_now)
      .field("active", r.active_now)
      .field("reserved", r.reserved_now)
      .field("free", r.free_now)
      .field("largest_free", r.largest_free_now)
      .fixed_field("fragmentation", r.fragmentation, kShareDecimals)
      .end_object();
}

void rank(JsonWriter& w, const RankSummary& r) {
  w.field("rank", r.rank).field("path", r.path).field("rank_from", r.rank_from);
  if (r.rank_from == "memsight_rank" || r.origin.seq >= 0)
    origin(w, r.origin);
  else
    w.key("origin").null();
  w.field("device", r.device)
      .field("devices", r.devices)
      .field("entries", r.entries)
      .field("first_time_us", r.first_time_us)
      .field("last_time_us", r.last_time_us);
  peak(w, "peak_allocated", r.peak_allocated, r.peak_allocated_event, r.peak_allocated_time_us);
  peak(w, "peak_active", r.peak_active, r.peak_active_event, r.peak_active_time_us);
  peak(w, "peak_reserved", r.peak_reserved, r.peak_reserved_event, r.peak_reserved_time_us);
  at_dump(w, r);
  w.field("device_total", r.device_total)
      .field("limit", r.limit)
      .field("exact", r.exact)
      .field("exactness", r.exactness);
  kinds(w, "kinds_peak", r.kinds_peak);
  kinds(w, "kinds_now", r.kinds_now);
  w.field("kinds_source", r.kinds_source);
  objects(w, "modules", r.modules, [](JsonWriter& o, const RankModule& m) {
    o.field("name", m.name).field("bytes", m.bytes);
  });
  w.field("modules_cut", r.modules_cut);
  objects(w, "sites", r.sites, [](JsonWriter& o, const RankSite& s) {
    o.field("site", s.site).field("bytes", s.bytes).field("count", s.count);
  });
  w.field("sites_cut", r.sites_cut);
  objects(w, "ooms", r.ooms, oom);
  w.field("layout", r.layout);
}

// A byte metric as an integer, fragmentation as a share.
void metric(JsonWriter& w, std::string_view k, RankMetric m, double v) {
  if (m == RankMetric::Fragmentation)
    w.fixed_field(k, v, kShareDecimals);
  else
    w.field(k, static_cast<int64_t>(v));
}

void outlier(JsonWriter& w, const RankOutlier& x) {
  w.field("rank", x.rank);
  objects(w, "deltas", x.deltas, [](JsonWriter& d, const RankDelta& y) {
    d.field("metric", rank_metric_key(y.metric));
    metric(d, "value", y.metric, y.value);
    metric(d, "median", y.metric, y.median);
    objects(d, "by", y.by, [](JsonWriter& p, const RankPart& z) {
      p.field("kind", z.kind).field("name", z.name).field("delta", z.delta);
    });
  });
}

}  // namespace

std::string ranks_json(const RanksReport& rep) {
  std::string out;
  JsonWriter w(out);
  w.begin_document();
  objects(w, "ranks", rep.ranks, rank);
  w.key("median").begin_object();
  for (size_t m = 0; m < kRankMetrics; ++m)
    metric(w, rank_metric_key(static_cast<RankMetric>(m)), static_cast<RankMetric>(m),
           rep.median[m]);
  kinds(w, "kinds_peak", rep.median_kinds_peak);
  kinds(w, "kinds_now", rep.median_kinds_now);
  w.end_object()
      .field("typical_rank", rep.typical_rank)
      .field("world_size", rep.world_size)
      .field("job_clock", rep.job_clock)
      .field("time_base_us", rep.time_base_us);
  objects(w, "differ", rep.outliers, outlier);
  objects(w, "ooms", rep.oom_verdicts, [](JsonWriter& o, const RankOomVerdict& v) {
    o.field("rank", v.rank).field("different", v.different).field("text", v.text);
  });
  strings(w, "mismatches", rep.mismatches);
  strings(w, "notes", rep.notes);
  // "missing" lists ranks one by one up to kMissingListed (a declared world
  // size of 10^9 must not write 10^9 numbers); "missing_ranges" is whole.
  w.key("missing").begin_array();
  int64_t listed = 0;
  for (auto [first, last] : rep.missing)
    for (int64_t r = first; r <= last && listed < kMissingListed; ++r, ++listed) w.value(r);
  w.end_array().field("missing_cut", listed < rank_count(rep.missing));
  w.key("missing_ranges").begin_array();
  for (auto [first, last] : rep.missing) w.begin_array().value(first).value(last).end_array();
  w.end_array();
  objects(w, "manifest_missing", rep.manifest_missing,
          [](JsonWriter& o, const std::pair<int64_t, std::string>& m) {
            o.field("rank", m.first).field("why", m.second);
          });
  w.end_object();
  out += '\n';
  return out;
}

}  // namespace memsight
