// ranks_text: the merged report of many ranks as a person reads it (a
// table, the OOMs judged, the ranks that differ and by what).
#include <algorithm>
#include <cstdio>
#include <set>

#include "analysis/kinds/classify.h"
#include "memsight/ranks.h"
#include "util/lines.h"
#include "util/text_format.h"

namespace memsight {
namespace {

// Above this many ranks the text table lists the notable ones only.
constexpr size_t kTextRanks = 32;

std::string fixed(double v, const char* fmt) {
  char b[48];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

std::string pad(std::string s, size_t width, bool right = true) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// Seconds on the report's clock (RanksReport::job_clock).
double seconds(const RanksReport& rep, const RankSummary& r, int64_t time_us) {
  int64_t base = rep.job_clock ? rep.time_base_us : r.first_time_us;
  return static_cast<double>(time_us - base) / 1e6;
}

std::string when(const RanksReport& rep, const RankSummary& r, int64_t event, int64_t time_us) {
  if (event < 0) return "at the start";
  return "at " + fixed(seconds(rep, r, time_us), "%.3f") + " s";
}

CategoryView view_of(const KindBytes& k) {
  CategoryView v;
  v.totals.bytes = k;
  return v;
}

std::string delta_line(const RankDelta& d) {
  double diff = d.value - d.median;
  if (d.metric == RankMetric::Fragmentation)
    return std::string(rank_metric_name(d.metric)) + " " + percent(d.value) +
           " against the median " + percent(d.median);
  std::string out = std::string(rank_metric_name(d.metric)) + " " + format_bytes(d.value) + ", " +
                    (diff >= 0 ? "+" : "-") + format_bytes(std::abs(diff)) +
                    (d.median > 0 ? " (" + signed_percent(diff / d.median) + ")" : "") +
                    " against the median " + format_bytes(d.median);
  if (!d.by.empty()) out += "; " + rank_parts_text(d.by);
  return out;
}

std::string table_row(const RanksReport& rep, const RankSummary& r) {
  std::string oom = r.ooms.empty()                   ? ""
                    : r.ooms.front().verdict.empty() ? "OOM"
                                                     : "OOM: " + r.ooms.front().verdict;
  return pad(std::to_string(r.rank), 6) + "  " + pad(format_bytes(double(r.peak_allocated)), 10) +
         " " + pad(when(rep, r, r.peak_allocated_event, r.peak_allocated_time_us), 13, false) +
         " " + pad(format_bytes(double(r.peak_reserved)), 10) + "  " +
         pad(format_bytes(double(r.allocated_now)) + " / " + format_bytes(double(r.reserved_now)),
             21) +
         "  " + pad(percent(r.fragmentation), 6) + "  " + oom + "\n";
}

// The ranks the text lists when there are many: OOMs, outliers, the typical
// one, and the lowest and highest peaks.
std::set<int64_t> notable(const RanksReport& rep) {
  std::set<int64_t> out{rep.typical_rank};
  for (const RankOutlier& o : rep.outliers) out.insert(o.rank);
  for (const RankOomVerdict& v : rep.oom_verdicts) out.insert(v.rank);
  auto [lo, hi] = std::minmax_element(rep.ranks.begin(), rep.ranks.end(),
                                      [](const RankSummary& a, const RankSummary& b) {
                                        return a.peak_allocated < b.peak_allocated;
                                      });
  out.insert(lo->rank);
  out.insert(hi->rank);
  return out;
}

std::string heading(const RanksReport& rep) {
  size_t ooms = rep.oom_verdicts.size();
  std::string out = count_of(static_cast<int64_t>(rep.ranks.size()), "rank");
  std::set<std::pair<std::string, int64_t>> rounds;
  for (const RankSummary& r : rep.ranks)
    if (r.origin.seq >= 0) rounds.emplace(r.origin.tag, r.origin.seq);
  std::string extra;
  if (rounds.size() == 1)
    extra = rounds.begin()->first + " round " + std::to_string(rounds.begin()->second);
  if (rep.world_size > 0)
    extra += (extra.empty() ? "" : ", ") + std::string("world size ") + count_text(rep.world_size);
  if (!extra.empty()) out += " (" + extra + ")";
  out += ooms ? ", " + count_text(static_cast<int64_t>(ooms)) + " ran out of memory"
              : ", none ran out of memory";
  return out + "\n";
}

// What does not match, what is missing, the notes and the clock.
std::string lines_before_the_table(const RanksReport& rep) {
  std::string out;
  for (const std::string& m : rep.mismatches) out += "  mismatch: " + m + "\n";
  if (const int64_t n = rank_count(rep.missing); n > 0)
    out += "  missing: no dump of rank" + std::string(n > 1 ? "s " : " ") +
           rank_ranges(rep.missing) +
           (rep.missing.size() < size_t(n) ? " (" + count_of(n, "rank") + ")" : "") + "\n";
  for (const auto& [rank, why] : rep.manifest_missing)
    out += "  rank " + std::to_string(rank) + " wrote nothing: " + why + "\n";
  for (const std::string& n : rep.notes) out += "  note: " + n + "\n";
  out += std::string("  times: seconds ") +
         (rep.job_clock ? "after the first trace entry of any rank (the ranks' clocks)"
                        : "after each rank's first trace entry") +
         "\n\n";
  return out;
}

std::string oom_text(const RanksReport& rep, const RankOomVerdict& v) {
  const RankSummary& r = *std::find_if(rep.ranks.begin(), rep.ranks.end(),
                                       [&](const RankSummary& x) { return x.rank == v.rank; });
  const RankOom& o = r.ooms.front();
  std::string out =
      "\nOUT OF MEMORY on rank " + std::to_string(r.rank) + ", trace entry " + count_text(o.event) +
      " (" + fixed(seconds(rep, r, o.time_us), "%.3f") + " s): " + o.verdict +
      (r.ooms.size() > 1
           ? " (" + count_of(static_cast<int64_t>(r.ooms.size()), "OOM") + ", the first)"
           : "") +
      "\n";
  out += wrap_words(v.text, "  ");
  out += wrap_words(o.explanation, "  ");
  if (o.requested || o.allocated)
    out += wrap_words("By kind: " + category_line(view_of(o.kinds)) + ".", "  ");
  if (!o.site.empty()) out += "  requested from: " + o.site + "\n";
  for (const std::string& fix : o.remedies) {
    std::string w = wrap_words(fix, "      ");
    out += "    - " + w.substr(6);
  }
  return out;
}

}  // namespace

std::string ranks_text(const RanksReport& rep) {
  std::string out = heading(rep);
  if (rep.ranks.empty()) return out;
  out += lines_before_the_table(rep);
  out += "  rank  peak alloc  when          peak resv  at the dump alloc/resv    frag  OOM\n";
  std::set<int64_t> shown;
  if (rep.ranks.size() > kTextRanks) shown = notable(rep);
  for (const RankSummary& r : rep.ranks)
    if (shown.empty() || shown.count(r.rank)) out += table_row(rep, r);
  if (!shown.empty())
    out += "   ... " +
           count_of(static_cast<int64_t>(rep.ranks.size() - shown.size()), "more rank") +
           " (--json or the page lists every rank)\n";
  // One rank is compared with nothing: no median row, no differences.
  const bool one = rep.ranks.size() == 1;
  const auto& m = rep.median;
  auto med = [&](RankMetric k) { return m[static_cast<size_t>(k)]; };
  if (!one)
    out += "median  " + pad(format_bytes(med(RankMetric::PeakAllocated)), 10) + " " + pad("", 13) +
           " " + pad(format_bytes(med(RankMetric::PeakReserved)), 10) + "  " +
           pad(format_bytes(med(RankMetric::AllocatedNow)) + " / " +
                   format_bytes(med(RankMetric::ReservedNow)),
               21) +
           "  " + pad(percent(med(RankMetric::Fragmentation)), 6) + "  (typical: rank " +
           std::to_string(rep.typical_rank) + ")\n";

  for (const RankOomVerdict& v : rep.oom_verdicts) out += oom_text(rep, v);

  if (one)
    return out + "\n" +
           wrap_words("What kind, at the peak: " +
                          category_line(view_of(rep.ranks[0].kinds_peak), kCategoryCount),
                      "");
  out += "\nRanks that differ from the median:\n";
  if (rep.outliers.empty())
    out += "  none: every rank is within " + percent(kDifferShare) + " (and " +
           format_bytes(double(kDifferBytes)) + ") of the median on every number\n";
  for (const RankOutlier& o : rep.outliers) {
    std::string lead = "  rank " + std::to_string(o.rank) + ": ";
    for (size_t i = 0; i < o.deltas.size(); ++i) {
      std::string w = wrap_words(delta_line(o.deltas[i]), std::string(lead.size() + 2, ' '));
      out += (i == 0 ? lead : std::string(lead.size(), ' ')) + w.substr(lead.size() + 2);
    }
  }
  out += "\n" + wrap_words("What kind, at the peak (medians): " +
                               category_line(view_of(rep.median_kinds_peak), kCategoryCount),
                           "");
  return out;
}

}  // namespace memsight
