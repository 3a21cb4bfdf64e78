// What the files say of themselves, before any number is compared: what
// does not match across them, and whether they are one job's at all. Files
// of two jobs merge into numbers that mean nothing, so every sign of it the
// snapshots carry is named: world sizes, job ids, one host's local rank held
// by two ranks, and recordings that do not overlap in time.
#include "analysis/ranks/ranks_checks.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "util/text_format.h"

namespace memsight {
namespace {

// "a (ranks 0-3), b (rank 4)": the values of `key` over the ranks that have one.
template <typename Key>
std::string groups(const std::vector<RankSummary>& ranks, Key key, size_t& count) {
  std::map<std::string, std::vector<int64_t>> by;
  for (const RankSummary& r : ranks)
    if (std::string k = key(r); !k.empty()) by[k].push_back(r.rank);
  count = by.size();
  std::string out;
  for (const auto& [k, rs] : by) {
    if (!out.empty()) out += ", ";
    out += k + " (rank" + (rs.size() > 1 ? "s " : " ") + rank_ranges(rs) + ")";
  }
  return out;
}

// Returns whether the world sizes differ.
bool name_origins(RanksReport& rep) {
  const auto& ranks = rep.ranks;
  size_t n = 0;
  std::string g = groups(
      ranks, [](const RankSummary& r) { return r.origin.torch_version; }, n);
  bool versions_known = std::all_of(ranks.begin(), ranks.end(), [](const RankSummary& r) {
    return !r.origin.torch_version.empty();
  });
  if (n > 1) rep.mismatches.push_back("torch versions differ: " + g);
  if (!versions_known) {
    g = groups(
        ranks, [](const RankSummary& r) { return "[" + r.layout + "]"; }, n);
    if (n > 1)
      rep.mismatches.push_back("the snapshots' top-level keys differ (torch versions?): " + g);
  }
  g = groups(
      ranks,
      [](const RankSummary& r) {
        std::string k = r.origin.device_name;
        if (r.device_total > 0) k += (k.empty() ? "" : ", ") + format_bytes(double(r.device_total));
        return k;
      },
      n);
  if (n > 1) rep.mismatches.push_back("devices differ: " + g);
  g = groups(
      ranks,
      [](const RankSummary& r) {
        return r.origin.seq < 0 ? std::string()
                                : r.origin.tag + " round " + std::to_string(r.origin.seq);
      },
      n);
  if (n > 1) rep.mismatches.push_back("the dumps come from different rounds: " + g);
  g = groups(
      ranks,
      [](const RankSummary& r) {
        return r.origin.world_size < 0 ? std::string() : std::to_string(r.origin.world_size);
      },
      n);
  if (n > 1) rep.mismatches.push_back("world sizes differ: " + g);
  if (n == 1)
    for (const RankSummary& r : ranks)
      if (r.origin.world_size > 0) rep.world_size = r.origin.world_size;
  return n > 1;
}

// A rank's recording on the wall clock, in microseconds since the epoch:
// its trace entries (torch's time_us, when it is a wall clock) and the
// moment of its dump. {0, 0} when it has neither.
std::pair<int64_t, int64_t> recorded(const RankSummary& r) {
  constexpr int64_t kWall = int64_t{1'000'000'000'000'000};  // after 2001-09-09
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  if (r.entries && r.first_time_us >= kWall) {
    lo = r.first_time_us;
    hi = std::max(r.first_time_us, r.last_time_us);
  }
  if (r.origin.time > 1e9 && r.origin.time < 1e11) {
    auto t = static_cast<int64_t>(r.origin.time * 1e6);
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  return lo == INT64_MAX ? std::pair<int64_t, int64_t>{0, 0} : std::pair{lo, hi};
}

std::string utc(int64_t us, bool date) {
  std::time_t t = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
  return b;
}

std::string span_text(int64_t us) {
  char b[32];
  double min = static_cast<double>(us) / 60e6;
  if (min < 120)
    std::snprintf(b, sizeof b, "%.0f min", min);
  else if (min < 48 * 60)
    std::snprintf(b, sizeof b, "%.1f h", min / 60);
  else
    std::snprintf(b, sizeof b, "%.1f days", min / (24 * 60));
  return b;
}

struct Recording {
  int64_t first = 0, last = 0;
  std::vector<int64_t> ranks;
};

// Ranks whose recordings overlap (or lie within kApartUs) are one group;
// returns "" for one group, else the groups and the widest gap.
std::string recorded_apart(const RanksReport& rep, int64_t& gap) {
  std::vector<std::pair<std::pair<int64_t, int64_t>, int64_t>> spans;
  for (const RankSummary& r : rep.ranks)
    if (auto s = recorded(r); s.first) spans.push_back({s, r.rank});
  std::sort(spans.begin(), spans.end());
  std::vector<Recording> groups;
  gap = 0;
  for (const auto& [s, rank] : spans) {
    if (groups.empty() || s.first > groups.back().last + kApartUs) {
      if (!groups.empty()) gap = std::max(gap, s.first - groups.back().last);
      groups.push_back({s.first, s.second, {}});
    }
    groups.back().last = std::max(groups.back().last, s.second);
    groups.back().ranks.push_back(rank);
  }
  if (groups.size() < 2) return "";
  constexpr size_t kListed = 4;
  std::string out;
  for (size_t i = 0; i < groups.size() && i < kListed; ++i) {
    const Recording& g = groups[i];
    bool same_day = g.first / 86'400'000'000 == g.last / 86'400'000'000;
    out += (out.empty() ? "" : "; ") + std::string(g.ranks.size() > 1 ? "ranks " : "rank ") +
           rank_ranges(g.ranks) + " from " + utc(g.first, true) + " to " + utc(g.last, !same_day) +
           " UTC";
  }
  if (groups.size() > kListed)
    out += "; and " + count_text(int64_t(groups.size() - kListed)) + " more";
  return out;
}

// Two ranks that ran as the same local rank on the same host, in two
// processes: not one job (or a job restarted in between). One process
// (the same pid) holding several ranks is a test's simulation, not two jobs.
std::string one_place_twice(const RanksReport& rep) {
  std::map<std::pair<std::string, int64_t>, const RankSummary*> seen;
  for (const RankSummary& r : rep.ranks) {
    if (r.origin.host.empty() || r.origin.local_rank < 0) continue;
    auto [it, fresh] = seen.emplace(std::pair{r.origin.host, r.origin.local_rank}, &r);
    if (!fresh && it->second->origin.pid != r.origin.pid)
      return "ranks " + count_text(it->second->rank) + " and " + count_text(r.rank) +
             " both ran as local rank " + count_text(r.origin.local_rank) + " on host " +
             r.origin.host;
  }
  return "";
}

}  // namespace

std::vector<int64_t> rank_numbers(const RanksReport& rep) {
  std::vector<int64_t> out;
  out.reserve(rep.ranks.size());
  for (const RankSummary& r : rep.ranks) out.push_back(r.rank);
  return out;
}

void name_mismatches(RanksReport& rep) {
  std::vector<std::string> why;
  if (name_origins(rep)) why.push_back("world sizes differ");
  size_t n = 0;
  std::string g = groups(
      rep.ranks, [](const RankSummary& r) { return r.origin.job; }, n);
  if (n > 1) {
    rep.mismatches.push_back("job ids differ: " + g);
    why.push_back("job ids differ");
  }
  if (std::string twice = one_place_twice(rep); !twice.empty()) {
    rep.mismatches.push_back("one place, two ranks: " + twice);
    why.push_back("one host's local rank twice");
  }
  int64_t gap = 0;
  if (std::string apart = recorded_apart(rep, gap); !apart.empty()) {
    rep.mismatches.push_back("recorded at different times: " + apart);
    why.push_back("recordings " + span_text(gap) + " apart");
  }
  if (why.empty()) return;
  std::string all;
  for (const std::string& w : why) all += (all.empty() ? "" : ", ") + w;
  rep.mismatches.insert(rep.mismatches.begin(),
                        "these files look like more than one job (" + all +
                            "): the numbers below compare ranks of different runs; give the "
                            "files of one job, such as one dump round's manifest");
}

}  // namespace memsight
