// merge_ranks(): the ranks in order, the median of each number, the ranks
// that differ from it and by what, a verdict on each OOM (different, or
// only first?), and what does not match across the files.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/ranks/ranks_checks.h"
#include "memsight/error.h"
#include "memsight/ranks.h"
#include "util/text_format.h"

namespace memsight {
namespace {

constexpr RankMetric kMetrics[kRankMetrics] = {RankMetric::PeakAllocated, RankMetric::PeakReserved,
                                               RankMetric::AllocatedNow, RankMetric::ReservedNow,
                                               RankMetric::Fragmentation};
constexpr size_t kPartsPerKind = 3;

// The lower median (an actual rank's value: with two ranks, the smaller).
template <typename T>
T median_of(std::vector<T> v) {
  if (v.empty()) return T{};
  auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

bool bytes_differ(double value, double median) {
  return std::fabs(value - median) >= std::max(kDifferShare * median, double(kDifferBytes));
}

bool differs(const RankSummary& r, RankMetric m, double median) {
  if (m == RankMetric::Fragmentation)
    return std::fabs(r.fragmentation - median) >= kDifferFragmentation &&
           r.free_now >= kDifferBytes;
  return bytes_differ(rank_metric(r, m), median);
}

using Items = std::vector<std::pair<std::string, int64_t>>;
using ItemMedians = std::unordered_map<std::string, int64_t>;

// Per name (module or site), the median over the ranks that can say: a rank
// that lists it, or whose list was not cut (then it holds none); names that
// fewer than half the ranks can say anything about are left out.
ItemMedians item_medians(const std::vector<Items>& lists, const std::vector<bool>& cut) {
  std::vector<std::unordered_map<std::string, int64_t>> listed(lists.size());
  std::unordered_map<std::string, std::vector<int64_t>> values;
  for (size_t i = 0; i < lists.size(); ++i)
    for (const auto& [name, bytes] : lists[i]) {
      listed[i].emplace(name, bytes);
      values.try_emplace(name);
    }
  ItemMedians out;
  for (auto& [name, v] : values) {
    for (size_t i = 0; i < lists.size(); ++i) {
      auto found = listed[i].find(name);
      if (found != listed[i].end())
        v.push_back(found->second);
      else if (!cut[i])
        v.push_back(0);
    }
    if (v.size() * 2 >= lists.size()) out.emplace(name, median_of(v));
  }
  return out;
}

void add_parts(std::vector<RankPart>& out, const char* kind, const Items& mine,
               const ItemMedians& med, bool cut, double diff) {
  std::vector<RankPart> parts;
  std::unordered_map<std::string, int64_t> have(mine.begin(), mine.end());
  for (const auto& [name, m] : med) {
    auto it = have.find(name);
    if (it == have.end() && cut) continue;  // unknown: below the rank's cut
    int64_t delta = (it == have.end() ? 0 : it->second) - m;
    // Parts that matter next to the difference, either way: at another
    // moment of the step a rank can hold more of one kind and less of another.
    if (delta == 0 || std::fabs(double(delta)) < std::fabs(diff) * 0.05 ||
        std::llabs(delta) < kDifferBytes / 4)
      continue;
    parts.push_back({kind, name, delta});
  }
  std::sort(parts.begin(), parts.end(), [](const RankPart& a, const RankPart& b) {
    return std::llabs(a.delta) != std::llabs(b.delta) ? std::llabs(a.delta) > std::llabs(b.delta)
                                                      : a.name < b.name;
  });
  if (parts.size() > kPartsPerKind) parts.resize(kPartsPerKind);
  out.insert(out.end(), parts.begin(), parts.end());
}

Items kind_items(const KindBytes& k) {
  Items out;
  for (size_t c = 0; c < kCategoryCount; ++c)
    out.emplace_back(std::string(category_name(static_cast<Category>(c))), k[c]);
  return out;
}

ItemMedians kind_medians(const KindBytes& median) {
  Items k = kind_items(median);
  return ItemMedians(k.begin(), k.end());
}

// Every rank's modules and sites, and the medians of each name.
struct Lists {
  std::vector<Items> modules, sites;
  ItemMedians module_medians, site_medians;
};

RankDelta delta_of(const RankSummary& r, size_t i, RankMetric m, const RanksReport& rep,
                   const Lists& lists) {
  RankDelta d{m, rank_metric(r, m), rep.median[static_cast<size_t>(m)], {}};
  double diff = d.value - d.median;
  if (m == RankMetric::PeakAllocated) {
    add_parts(d.by, "kind", kind_items(r.kinds_peak), kind_medians(rep.median_kinds_peak), false,
              diff);
    add_parts(d.by, "module", lists.modules[i], lists.module_medians, r.modules_cut, diff);
    add_parts(d.by, "site", lists.sites[i], lists.site_medians, r.sites_cut, diff);
  } else if (m == RankMetric::AllocatedNow) {
    add_parts(d.by, "kind", kind_items(r.kinds_now), kind_medians(rep.median_kinds_now), false,
              diff);
  }
  return d;
}

RankOomVerdict judge_oom(const RankSummary& r, const RanksReport& rep) {
  RankOomVerdict v{r.rank, false, ""};
  std::vector<int64_t> others, oom_others;
  for (const RankSummary& o : rep.ranks) {
    if (o.rank == r.rank) continue;
    others.push_back(o.peak_allocated);
    if (!o.ooms.empty()) oom_others.push_back(o.rank);
  }
  const std::string name = "Rank " + std::to_string(r.rank);
  if (others.empty()) {
    v.text = name + " is the only rank given: nothing to compare it with.";
    return v;
  }
  double med = static_cast<double>(median_of(others)), peak = static_cast<double>(r.peak_allocated);
  double diff = peak - med;
  std::string also = oom_others.empty() ? ""
                                        : (oom_others.size() == 1 ? " Rank " : " Ranks ") +
                                              rank_ranges(oom_others) + " ran out of memory too.";
  const std::string& verdict = r.ooms.front().verdict;
  if (!bytes_differ(peak, med) && (verdict == "limit" || verdict == "other processes")) {
    // The same work on a smaller device: what differs is the device.
    v.text =
        name + " held what the other ranks hold (its peak " + format_bytes(peak) +
        ", their median " + format_bytes(med) + "); what differs is its device: " +
        (verdict == "limit" ? "a memory cap inside the process (set_per_process_memory_fraction"
                              " or similar) that the others may not have"
                            : "memory that other processes held on its GPU") +
        "." + also;
    return v;
  }
  if (!bytes_differ(peak, med)) {
    v.text = name + " was not different, only the one that failed: the other ranks' peaks reach " +
             "as much (median " + format_bytes(med) + ", its own " + format_bytes(peak) +
             "), so every rank needs about this memory and a fix must lower all of them." + also;
    return v;
  }
  v.different = true;
  if (diff > 0) {
    std::string by;
    for (const RankOutlier& o : rep.outliers)
      if (o.rank == r.rank)
        for (const RankDelta& d : o.deltas)
          if (d.metric == RankMetric::PeakAllocated) by = rank_parts_text(d.by);
    v.text = name + " was different: its peak allocated " + format_bytes(peak) + " is " +
             format_bytes(diff) + " (" + percent(diff, med) + ") above the other ranks' median " +
             format_bytes(med) + (by.empty() ? "." : "; " + by + ".") + also;
  } else {
    v.text = name + " ran out with less than the other ranks hold (its peak " + format_bytes(peak) +
             ", their median " + format_bytes(med) + "): look at its device (" +
             (r.ooms.front().verdict.empty() ? "see its diagnosis" : r.ooms.front().verdict) +
             ") rather than its work." + also;
  }
  return v;
}

void add_notes(RanksReport& rep, const std::vector<int64_t>& numbered) {
  std::vector<int64_t> inexact, empty, multi;
  for (const RankSummary& r : rep.ranks) {
    if (!r.exact) inexact.push_back(r.rank);
    if (r.entries == 0) empty.push_back(r.rank);
    if (r.devices > 1) multi.push_back(r.rank);
  }
  if (!numbered.empty())
    rep.notes.push_back("rank" + std::string(numbered.size() > 1 ? "s " : " ") +
                        rank_ranges(numbered) +
                        " numbered by argument order (neither the snapshot nor the file name "
                        "says which rank it is)");
  if (!inexact.empty())
    rep.notes.push_back("peaks are lower bounds on rank" +
                        std::string(inexact.size() > 1 ? "s " : " ") + rank_ranges(inexact) +
                        " (the history wrapped or began late)");
  if (!empty.empty())
    rep.notes.push_back("no trace entries on rank" + std::string(empty.size() > 1 ? "s " : " ") +
                        rank_ranges(empty) + " (was allocator history recorded?)");
  if (!multi.empty())
    rep.notes.push_back("rank" + std::string(multi.size() > 1 ? "s " : " ") + rank_ranges(multi) +
                        " used several devices; each rank's busiest device is summarised");
  if (rep.ranks.size() == 1) rep.notes.push_back(kOneRank);
}

// Two files of one rank that hold the same dump: memsight_rank says the same
// round and the same moment.
bool same_dump(const RankSummary& a, const RankSummary& b) {
  return a.origin.seq >= 0 && a.origin.seq == b.origin.seq && a.origin.tag == b.origin.tag &&
         a.origin.time == b.origin.time && a.origin.pid == b.origin.pid;
}

std::string twice(const RankSummary& a, const RankSummary& b) {
  std::string hint = "DIR/oom_1_rank*.pickle";
  if (b.origin.seq >= 0) {
    size_t slash = b.path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "" : b.path.substr(0, slash + 1);
    std::string round = b.origin.tag + "_" + std::to_string(b.origin.seq);
    hint = dir + round + "_manifest.json or '" + dir + round + "_rank*.pickle'";
  }
  return "rank " + std::to_string(b.rank) + " appears twice: " + a.path + " and " + b.path +
         "; give the files of one dump round (e.g. " + hint + ")";
}

// A rank twice is an error, unless both files hold the same dump (the OOM
// snapshot and its name in the round). Ranks no file names are numbered in
// argument order, with the numbers left. Sorts rep.ranks by rank and returns
// the ranks it numbered.
std::vector<int64_t> number_ranks(RanksReport& rep, std::vector<RankSummary> ranks) {
  std::set<int64_t> taken;
  std::map<int64_t, size_t> seen;  // rank -> index in kept
  std::vector<RankSummary> kept;
  std::vector<std::string> same;
  for (RankSummary& r : ranks) {
    if (r.rank >= 0) {
      auto [it, fresh] = seen.emplace(r.rank, kept.size());
      if (!fresh && same_dump(kept[it->second], r)) {
        same.push_back(r.path + " (" + kept[it->second].path + ")");
        continue;
      }
      if (!fresh) throw Error(twice(kept[it->second], r));
      taken.insert(r.rank);
    }
    kept.push_back(std::move(r));
  }
  if (!same.empty())
    rep.notes.push_back(
        "the same dump under two names, read once: " + same.front() +
        (same.size() > 1 ? " and " + std::to_string(same.size() - 1) + " more" : ""));
  std::vector<int64_t> numbered;
  int64_t next = 0;
  for (RankSummary& r : kept) {
    if (r.rank >= 0) continue;
    while (taken.count(next)) ++next;
    r.rank = next++;
    r.rank_from = "argument order";
    numbered.push_back(r.rank);
  }
  std::sort(kept.begin(), kept.end(),
            [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
  rep.ranks = std::move(kept);
  return numbered;
}

void take_medians(RanksReport& rep) {
  const auto& rs = rep.ranks;
  for (RankMetric m : kMetrics) {
    std::vector<double> v;
    for (const RankSummary& r : rs) v.push_back(rank_metric(r, m));
    rep.median[static_cast<size_t>(m)] = median_of(v);
  }
  for (size_t c = 0; c < kCategoryCount; ++c) {
    std::vector<int64_t> peak, now;
    for (const RankSummary& r : rs) {
      peak.push_back(r.kinds_peak[c]);
      now.push_back(r.kinds_now[c]);
    }
    rep.median_kinds_peak[c] = median_of(peak);
    rep.median_kinds_now[c] = median_of(now);
  }
}

// The typical rank: nearest the medians of the byte numbers, relatively.
void pick_typical_rank(RanksReport& rep) {
  double best = 0;
  for (const RankSummary& r : rep.ranks) {
    double dist = 0;
    for (RankMetric m : kMetrics) {
      if (m == RankMetric::Fragmentation) continue;
      double med = rep.median[static_cast<size_t>(m)];
      dist += std::fabs(rank_metric(r, m) - med) / std::max(med, 1.0);
    }
    if (rep.typical_rank < 0 || dist < best) {
      best = dist;
      rep.typical_rank = r.rank;
    }
  }
}

// The per-rank rows: each rank's numbers that differ from the median, with
// the modules and sites behind the difference.
void find_outliers(RanksReport& rep) {
  const auto& rs = rep.ranks;
  Lists lists;
  std::vector<bool> modules_cut, sites_cut;
  for (const RankSummary& r : rs) {
    Items mods, sites;
    for (const RankModule& m : r.modules) mods.emplace_back(m.name, m.bytes);
    for (const RankSite& s : r.sites) sites.emplace_back(s.site, s.bytes);
    lists.modules.push_back(std::move(mods));
    lists.sites.push_back(std::move(sites));
    modules_cut.push_back(r.modules_cut);
    sites_cut.push_back(r.sites_cut);
  }
  lists.module_medians = item_medians(lists.modules, modules_cut);
  lists.site_medians = item_medians(lists.sites, sites_cut);
  for (size_t i = 0; i < rs.size(); ++i) {
    RankOutlier o{rs[i].rank, {}};
    for (RankMetric m : kMetrics)
      if (differs(rs[i], m, rep.median[static_cast<size_t>(m)]))
        o.deltas.push_back(delta_of(rs[i], i, m, rep, lists));
    if (!o.deltas.empty()) rep.outliers.push_back(std::move(o));
  }
}

// One clock for the job when every rank's times are wall-clock times.
void take_time_base(RanksReport& rep) {
  bool wall = true;
  rep.time_base_us = INT64_MAX;
  for (const RankSummary& r : rep.ranks) {
    if (!r.entries) continue;
    wall = wall && r.first_time_us >= int64_t{1'000'000'000'000'000};  // after 2001-09-09
    rep.time_base_us = std::min(rep.time_base_us, r.first_time_us);
  }
  rep.job_clock = wall && rep.time_base_us != INT64_MAX;
  if (!rep.job_clock) rep.time_base_us = 0;
}

}  // namespace

RanksReport merge_ranks(std::vector<RankSummary> ranks) {
  RanksReport rep;
  std::vector<int64_t> numbered = number_ranks(rep, std::move(ranks));
  if (rep.ranks.empty()) return rep;
  take_medians(rep);
  pick_typical_rank(rep);
  find_outliers(rep);
  for (const RankSummary& r : rep.ranks)
    if (!r.ooms.empty()) rep.oom_verdicts.push_back(judge_oom(r, rep));
  take_time_base(rep);
  name_mismatches(rep);
  if (rep.world_size > 0) rep.missing = ranks_missing(rep.world_size, rank_numbers(rep));
  add_notes(rep, numbered);
  return rep;
}

}  // namespace memsight
