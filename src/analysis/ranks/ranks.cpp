// summarize_rank() cuts one snapshot's summary down to what the merge keeps;
// merge_ranks() numbers, orders and compares the ranks: medians, the ranks
// that differ and by what, each OOM judged against the other ranks, and
// what does not match.
#include "memsight/ranks.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "input/source.h"
#include "memsight/error.h"
#include "memsight/summary.h"
#include "util/text_format.h"

namespace memsight {
namespace {

int64_t int_of(const PyValue* d, std::string_view key) {
  const PyValue* v = d ? d->get(key) : nullptr;
  return v && v->kind == PyValue::Kind::Int ? v->i : -1;
}

std::string str_of(const PyValue* d, std::string_view key) {
  const PyValue* v = d ? d->get(key) : nullptr;
  return v && v->kind == PyValue::Kind::Str ? v->s.str() : std::string();
}

// A number the dump declares, range-checked: a world size decides how many
// ranks the report calls missing, so 0, -5 or 10^12 is refused by the file's
// name rather than taken. Absent (or not an integer): -1.
int64_t declared(const PyValue* d, std::string_view key, int64_t lo, int64_t hi,
                 const std::string& path) {
  const PyValue* v = d->get(key);
  if (!v || (v->kind != PyValue::Kind::Int && v->kind != PyValue::Kind::BigInt)) return -1;
  if (v->kind == PyValue::Kind::Int && v->i >= lo && v->i <= hi) return v->i;
  throw Error(input_name(path) + ": memsight_rank says " + std::string(key) + " " +
              (v->kind == PyValue::Kind::Int ? std::to_string(v->i) : std::string("past 2^63")) +
              ", outside " + count_text(lo) + " to " + count_text(hi));
}

RankOrigin read_origin(const Snapshot& snap, const std::string& path) {
  RankOrigin o;
  const PyValue* d = snap.top("memsight_rank");
  if (!d || d->kind != PyValue::Kind::Dict) return o;
  o.world_size = declared(d, "world_size", 1, kMaxWorldSize, path);
  o.rank = declared(d, "rank", 0, o.world_size > 0 ? o.world_size - 1 : kMaxWorldSize - 1, path);
  o.local_rank = int_of(d, "local_rank");
  o.seq = int_of(d, "seq");
  o.origin_rank = int_of(d, "origin_rank");
  o.batch = int_of(d, "batch");
  o.pid = int_of(d, "pid");
  o.device_total = int_of(d, "device_total");
  if (const PyValue* t = d->get("time"))
    o.time = t->kind == PyValue::Kind::Float ? t->f : t->kind == PyValue::Kind::Int ? t->i : 0;
  o.tag = str_of(d, "tag");
  o.reason = str_of(d, "reason");
  o.host = str_of(d, "host");
  o.torch_version = str_of(d, "torch");
  o.device_name = str_of(d, "device_name");
  o.job = str_of(d, "job");
  return o;
}

// The last "rank3", "rank_3" or "rank-3" in the file's name; -1 if none.
int64_t rank_in_name(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  for (char& c : base) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int64_t found = -1;
  for (size_t at = base.find("rank"); at != std::string::npos; at = base.find("rank", at + 1)) {
    size_t p = at + 4;
    if (p < base.size() && (base[p] == '_' || base[p] == '-')) ++p;
    size_t q = p;
    while (q < base.size() && q - p < 9 && std::isdigit(static_cast<unsigned char>(base[q]))) ++q;
    if (q > p) found = std::stoll(base.substr(p, q - p));
  }
  return found;
}

// Bytes made in each module itself (its submodules' bytes taken out), the
// largest kRankModules.
std::vector<RankModule> own_module_bytes(const CategoryView& v, bool& cut) {
  std::vector<int64_t> own(v.modules.size());
  for (size_t i = 0; i < v.modules.size(); ++i) {
    own[i] += v.modules[i].total;
    if (int32_t p = v.modules[i].parent; p >= 0) own[static_cast<size_t>(p)] -= v.modules[i].total;
  }
  std::vector<RankModule> out;
  for (size_t i = 0; i < v.modules.size(); ++i)
    if (own[i] > 0) out.push_back({v.modules[i].name, own[i]});
  std::stable_sort(out.begin(), out.end(),
                   [](const RankModule& a, const RankModule& b) { return a.bytes > b.bytes; });
  cut = out.size() > kRankModules;
  if (cut) out.resize(kRankModules);
  return out;
}

std::string kinds_source(const CategoryTotals& t) {
  int64_t tagged = 0;
  for (int64_t b : t.tagged) tagged += b;
  if (tagged == 0) return "inferred";
  return tagged >= t.total() ? "tagged" : "tagged and inferred";
}

}  // namespace

std::string_view rank_metric_name(RankMetric m) {
  switch (m) {
    case RankMetric::PeakAllocated:
      return "peak allocated";
    case RankMetric::PeakReserved:
      return "peak reserved";
    case RankMetric::AllocatedNow:
      return "allocated at the dump";
    case RankMetric::ReservedNow:
      return "reserved at the dump";
    case RankMetric::Fragmentation:
      return "fragmentation";
  }
  return "";
}

std::string_view rank_metric_key(RankMetric m) {
  switch (m) {
    case RankMetric::PeakAllocated:
      return "peak_allocated";
    case RankMetric::PeakReserved:
      return "peak_reserved";
    case RankMetric::AllocatedNow:
      return "allocated_now";
    case RankMetric::ReservedNow:
      return "reserved_now";
    case RankMetric::Fragmentation:
      return "fragmentation";
  }
  return "";
}

double rank_metric(const RankSummary& r, RankMetric m) {
  switch (m) {
    case RankMetric::PeakAllocated:
      return static_cast<double>(r.peak_allocated);
    case RankMetric::PeakReserved:
      return static_cast<double>(r.peak_reserved);
    case RankMetric::AllocatedNow:
      return static_cast<double>(r.allocated_now);
    case RankMetric::ReservedNow:
      return static_cast<double>(r.reserved_now);
    case RankMetric::Fragmentation:
      return r.fragmentation;
  }
  return 0;
}

std::string rank_parts_text(const std::vector<RankPart>& by) {
  std::string out;
  for (const char* kind : {"kind", "module", "site"}) {
    std::string items;
    for (const RankPart& p : by) {
      if (p.kind != kind) continue;
      if (!items.empty()) items += ", ";
      items +=
          (p.kind == "module" && p.name.empty() ? "(model)" : p.name) + " " + signed_bytes(p.delta);
    }
    if (!items.empty()) out += (out.empty() ? "by " : "; by ") + std::string(kind) + ": " + items;
  }
  return out;
}

std::string rank_ranges(std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<RankRange> ranges;
  for (int64_t r : ranks)
    if (!ranges.empty() && ranges.back().second + 1 == r)
      ranges.back().second = r;
    else
      ranges.emplace_back(r, r);
  return rank_ranges(ranges);
}

std::string rank_ranges(const std::vector<RankRange>& ranges) {
  std::string out;
  for (auto [first, last] : ranges) {
    if (!out.empty()) out += ", ";
    out += count_text(first);
    if (last > first) out += (last == first + 1 ? ", " : "-") + count_text(last);
  }
  return out;
}

int64_t rank_count(const std::vector<RankRange>& ranges) {
  int64_t n = 0;
  for (auto [first, last] : ranges) n += last - first + 1;
  return n;
}

std::vector<RankRange> ranks_missing(int64_t world_size, const std::vector<int64_t>& present) {
  std::vector<RankRange> out;
  int64_t next = 0;  // the lowest rank not yet accounted for
  for (int64_t r : present) {
    if (r >= world_size) break;
    if (r > next) out.emplace_back(next, r - 1);
    next = std::max(next, r + 1);
  }
  if (next < world_size) out.emplace_back(next, world_size - 1);
  return out;
}

RankSummary summarize_rank(const Snapshot& snap, const std::string& path,
                           const UserCode& user_code) {
  RankSummary r;
  r.path = path;
  r.origin = read_origin(snap, path);
  if (r.origin.rank >= 0) {
    r.rank = r.origin.rank;
    r.rank_from = "memsight_rank";
  } else if ((r.rank = rank_in_name(path)) >= 0) {
    r.rank_from = "file name";
  }
  for (const std::string& k : snap.top_keys)
    if (k.rfind("memsight_", 0) != 0) r.layout += (r.layout.empty() ? "" : ",") + k;
  Summary s = summarize(snap, {.user_code = user_code, .top_sites = kRankSites});
  // The busiest device: alike devices are one group, named by its first.
  // A device counts as used where the rank held memory on it: torch lists
  // every device the process could see, and a trace entry that holds no
  // memory (a "snapshot" mark) is not use.
  const DeviceSummary* d = nullptr;
  for (size_t g = 0; g < s.devices.size(); ++g) {
    const DeviceSummary& ds = s.devices[g];
    if (ds.entries == 0 && ds.segments_now == 0) continue;
    if (ds.peak_allocated > 0 || ds.peak_reserved > 0 || ds.reserved_now > 0)
      for (auto [first, last] : s.members[g]) r.devices += static_cast<size_t>(last - first) + 1;
    if (!d || ds.peak_reserved > d->peak_reserved ||
        (ds.peak_reserved == d->peak_reserved && ds.entries > d->entries))
      d = &ds;
  }
  r.device_total = r.origin.device_total;
  if (!d) return r;
  r.device = d->device;
  r.entries = d->entries;
  if (d->entries) {
    auto [begin, end] = snap.device_rows(static_cast<size_t>(d->device));
    r.first_time_us = snap.trace.time_us[begin];
    r.last_time_us = snap.trace.time_us[end - 1];
  }
  r.peak_allocated = d->peak_allocated;
  r.peak_allocated_event = d->peak_allocated_event;
  r.peak_allocated_time_us = d->peak_allocated_time_us;
  r.peak_active = d->peak_active;
  r.peak_active_event = d->peak_active_event;
  r.peak_active_time_us = d->peak_active_time_us;
  r.peak_reserved = d->peak_reserved;
  r.peak_reserved_event = d->peak_reserved_event;
  r.peak_reserved_time_us = d->peak_reserved_time_us;
  r.allocated_now = d->allocated_now;
  r.active_now = d->active_now;
  r.reserved_now = d->reserved_now;
  r.free_now = d->free_now;
  r.largest_free_now = d->largest_free_now;
  r.fragmentation = d->fragmentation;
  r.exact = d->exact;
  r.exactness = d->exactness;
  r.kinds_peak = d->categories_peak.totals.bytes;
  r.kinds_now = d->categories_now.totals.bytes;
  r.kinds_source = kinds_source(d->categories_peak.totals);
  r.modules = own_module_bytes(d->categories_peak, r.modules_cut);
  r.sites_cut = d->sites_total > static_cast<int64_t>(d->top_sites.size());
  for (const SiteStat& st : d->top_sites) r.sites.push_back({st.site, st.bytes, st.count});
  for (const OomReport& o : d->ooms) {
    if (o.device_total > 0) r.device_total = o.device_total;
    if (o.limit > 0) r.limit = o.limit;
    r.ooms.push_back({o.event, o.time_us, o.requested, o.allocated, o.reserved, o.device_free,
                      o.pool, o.site, std::string(oom_cause_name(o.verdict)), o.explanation,
                      oom_cause_names(o.causes), remedy_texts(o.remedies),
                      o.categories.totals.bytes});
  }
  return r;
}

}  // namespace memsight
