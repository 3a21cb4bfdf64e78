// ranks_json: every number of every rank, the medians, the differences, the
// OOM verdicts and what does not match (docs/formats.md, "memsight ranks
// --json").
#include <cstdio>

#include "memsight/ranks.h"
#include "util/escape.h"

namespace memsight {
namespace {

// Objects and lists written key by key: a key after another value gets its comma.
void key(std::string& out, std::string_view k) {
  if (out.back() != '{' && out.back() != '[') out += ',';
  out += '"';
  out += k;
  out += "\":";
}

void num(std::string& out, std::string_view k, int64_t v) {
  key(out, k);
  out += std::to_string(v);
}

void real(std::string& out, std::string_view k, double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.6f", v);
  key(out, k);
  out += b;
}

void str(std::string& out, std::string_view k, std::string_view v) {
  key(out, k);
  append_json_string(out, v);
}

void boolean(std::string& out, std::string_view k, bool v) {
  key(out, k);
  out += v ? "true" : "false";
}

void strings(std::string& out, std::string_view k, const std::vector<std::string>& v) {
  key(out, k);
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, v[i]);
  }
  out += ']';
}

// A list of objects: item(out, element) writes the object's keys.
template <typename T, typename F>
void objects(std::string& out, std::string_view k, const std::vector<T>& v, F&& item) {
  key(out, k);
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    out += i ? ",{" : "{";
    item(out, v[i]);
    out += '}';
  }
  out += ']';
}

void kinds(std::string& out, std::string_view k, const KindBytes& b) {
  key(out, k);
  out += '{';
  for (size_t c = 0; c < kCategoryCount; ++c)
    num(out, category_key(static_cast<Category>(c)), b[c]);
  out += '}';
}

void peak(std::string& out, std::string_view k, int64_t bytes, int64_t event, int64_t time_us) {
  key(out, k);
  out += '{';
  num(out, "bytes", bytes);
  num(out, "event", event);
  num(out, "time_us", time_us);
  out += '}';
}

void origin(std::string& out, const RankOrigin& o) {
  key(out, "origin");
  out += '{';
  num(out, "rank", o.rank);
  num(out, "world_size", o.world_size);
  num(out, "local_rank", o.local_rank);
  num(out, "seq", o.seq);
  num(out, "origin_rank", o.origin_rank);
  num(out, "batch", o.batch);
  num(out, "pid", o.pid);
  num(out, "device_total", o.device_total);
  real(out, "time", o.time);
  str(out, "tag", o.tag);
  str(out, "reason", o.reason);
  str(out, "host", o.host);
  str(out, "torch", o.torch_version);
  str(out, "device_name", o.device_name);
  out += '}';
}

void oom(std::string& out, const RankOom& o) {
  num(out, "event", o.event);
  num(out, "time_us", o.time_us);
  num(out, "requested", o.requested);
  num(out, "allocated", o.allocated);
  num(out, "reserved", o.reserved);
  num(out, "device_free", o.device_free);
  str(out, "pool", o.pool);
  str(out, "site", o.site);
  str(out, "verdict", o.verdict);
  strings(out, "causes", o.causes);
  str(out, "explanation", o.explanation);
  strings(out, "remedies", o.remedies);
  kinds(out, "kinds", o.kinds);
}

void rank(std::string& out, const RankSummary& r) {
  num(out, "rank", r.rank);
  str(out, "path", r.path);
  str(out, "rank_from", r.rank_from);
  if (r.rank_from == "memsight_rank" || r.origin.seq >= 0) {
    origin(out, r.origin);
  } else {
    key(out, "origin");
    out += "null";
  }
  num(out, "device", r.device);
  num(out, "devices", static_cast<int64_t>(r.devices));
  num(out, "entries", static_cast<int64_t>(r.entries));
  num(out, "first_time_us", r.first_time_us);
  num(out, "last_time_us", r.last_time_us);
  peak(out, "peak_allocated", r.peak_allocated, r.peak_allocated_event, r.peak_allocated_time_us);
  peak(out, "peak_active", r.peak_active, r.peak_active_event, r.peak_active_time_us);
  peak(out, "peak_reserved", r.peak_reserved, r.peak_reserved_event, r.peak_reserved_time_us);
  key(out, "at_dump");
  out += '{';
  num(out, "allocated", r.allocated_now);
  num(out, "active", r.active_now);
  num(out, "reserved", r.reserved_now);
  num(out, "free", r.free_now);
  num(out, "largest_free", r.largest_free_now);
  real(out, "fragmentation", r.fragmentation);
  out += '}';
  num(out, "device_total", r.device_total);
  num(out, "limit", r.limit);
  boolean(out, "exact", r.exact);
  str(out, "exactness", r.exactness);
  kinds(out, "kinds_peak", r.kinds_peak);
  kinds(out, "kinds_now", r.kinds_now);
  str(out, "kinds_source", r.kinds_source);
  objects(out, "modules", r.modules, [](std::string& o, const RankModule& m) {
    str(o, "name", m.name);
    num(o, "bytes", m.bytes);
  });
  boolean(out, "modules_cut", r.modules_cut);
  objects(out, "sites", r.sites, [](std::string& o, const RankSite& s) {
    str(o, "site", s.site);
    num(o, "bytes", s.bytes);
    num(o, "count", s.count);
  });
  boolean(out, "sites_cut", r.sites_cut);
  objects(out, "ooms", r.ooms, oom);
  str(out, "layout", r.layout);
}

// A byte metric as an integer, fragmentation as a share.
void metric(std::string& out, std::string_view k, RankMetric m, double v) {
  if (m == RankMetric::Fragmentation)
    real(out, k, v);
  else
    num(out, k, static_cast<int64_t>(v));
}

}  // namespace

std::string ranks_json(const RanksReport& rep) {
  std::string out = "{";
  objects(out, "ranks", rep.ranks, rank);
  key(out, "median");
  out += '{';
  for (size_t m = 0; m < kRankMetrics; ++m)
    metric(out, rank_metric_key(static_cast<RankMetric>(m)), static_cast<RankMetric>(m),
           rep.median[m]);
  kinds(out, "kinds_peak", rep.median_kinds_peak);
  kinds(out, "kinds_now", rep.median_kinds_now);
  out += '}';
  num(out, "typical_rank", rep.typical_rank);
  num(out, "world_size", rep.world_size);
  boolean(out, "job_clock", rep.job_clock);
  num(out, "time_base_us", rep.time_base_us);
  objects(out, "differ", rep.outliers, [](std::string& o, const RankOutlier& x) {
    num(o, "rank", x.rank);
    objects(o, "deltas", x.deltas, [](std::string& d, const RankDelta& y) {
      str(d, "metric", rank_metric_key(y.metric));
      metric(d, "value", y.metric, y.value);
      metric(d, "median", y.metric, y.median);
      objects(d, "by", y.by, [](std::string& p, const RankPart& z) {
        str(p, "kind", z.kind);
        str(p, "name", z.name);
        num(p, "delta", z.delta);
      });
    });
  });
  objects(out, "ooms", rep.oom_verdicts, [](std::string& o, const RankOomVerdict& v) {
    num(o, "rank", v.rank);
    boolean(o, "different", v.different);
    str(o, "text", v.text);
  });
  strings(out, "mismatches", rep.mismatches);
  strings(out, "notes", rep.notes);
  key(out, "missing");
  out += '[';
  for (size_t i = 0; i < rep.missing.size(); ++i)
    out += (i ? "," : "") + std::to_string(rep.missing[i]);
  out += ']';
  objects(out, "manifest_missing", rep.manifest_missing,
          [](std::string& o, const std::pair<int64_t, std::string>& m) {
            num(o, "rank", m.first);
            str(o, "why", m.second);
          });
  out += "}\n";
  return out;
}

}  // namespace memsight
