// find_leaks(): per device, one replay of the allocator, the iterations of
// the trace, and the sites whose allocations outlive their iteration in
// every part of the run (docs/leaks.md, "What counts as a leak").
//
// Iterations 0..n-1 are the complete ones. An allocation made in iteration
// i < n-1 that is still live at the end of the trace survived: the next
// iteration did not free it, nor any later one. Survivors from the first
// iterations only are memory made once and kept (weights moved, optimizer
// state, a cache that fills up): not a leak. A site is leaking when its
// survivors come from every quarter of the measured iterations.
#include "memsight/leaks.h"

#include <algorithm>
#include <unordered_map>

#include "allocator/replay.h"
#include "allocator/trace_start.h"
#include "analysis/alike/alike.h"
#include "analysis/frames/report_text.h"
#include "analysis/kinds/classify.h"
#include "analysis/leaks/leak_advice.h"
#include "analysis/leaks/leak_holders.h"
#include "analysis/leaks/leaks_format.h"
#include "analysis/moments/process_marks.h"
#include "analysis/summary/sites.h"
#include "util/text_format.h"

namespace memsight {
namespace {

constexpr size_t kMaxSeries = 8;  // site curves for the page
constexpr size_t kMaxNewest = 5;  // survivors listed per site
constexpr size_t kMaxSites = 50;  // leaking sites reported

// One site's survivors: blocks made in a checked iteration, live at the end.
struct Survivors {
  std::string label;
  StackId stack = 0;
  // (iteration, bytes) of the checked iterations that left any, ascending:
  // sparse, as a file may hold millions of steps.
  std::vector<std::pair<int64_t, int64_t>> per_iteration;
  std::vector<uint32_t> blocks;  // indices into the replay's blocks, in allocation order
};

// The iteration an event belongs to (-1: before the first).
int64_t iteration_of(const Iterations& its, int64_t event) {
  return std::upper_bound(its.starts.begin(), its.starts.end(), event) - its.starts.begin() - 1;
}

// Live bytes at each iteration start, of all blocks (row 0) and of those
// series_of(block) puts in row 1..k (0: none). A block counts from the first
// start after its allocation up to its free_requested.
template <class SeriesOf>
std::vector<std::vector<int64_t>> live_at_starts(const replay::Result& rr, const Iterations& its,
                                                 size_t k, SeriesOf series_of) {
  const auto& starts = its.starts;
  std::vector<std::vector<int64_t>> rows(k + 1, std::vector<int64_t>(starts.size() + 1, 0));
  for (uint32_t i = 0; i < rr.blocks.size(); ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    if (l.free_requested == replay::Lifetime::kBefore) continue;  // pending when the trace began
    auto from = iteration_of(its, l.alloc_event) + 1, to = iteration_of(its, l.free_requested) + 1;
    if (from >= to) continue;
    rows[0][from] += l.size;
    rows[0][to] -= l.size;
    if (size_t s = series_of(i)) {
      rows[s][from] += l.size;
      rows[s][to] -= l.size;
    }
  }
  for (auto& row : rows) {
    int64_t run = 0;
    for (int64_t& v : row) v = run += v;
    row.pop_back();
  }
  return rows;
}

// Bytes per iteration over `checked` iterations.
int64_t rate_of(const Survivors& s, int64_t checked) {
  std::vector<int64_t> bytes;
  int64_t total = 0;
  for (auto [i, b] : s.per_iteration) {
    bytes.push_back(b);
    total += b;
  }
  if (static_cast<int64_t>(bytes.size()) < checked)  // not every iteration: the average
    return (total + checked / 2) / checked;
  // Every iteration: the typical amount, whatever one of them added besides.
  auto mid = bytes.begin() + checked / 2;
  std::nth_element(bytes.begin(), mid, bytes.end());
  return *mid;
}

// Survivors from every quarter of the `checked` iterations.
bool leaking(const Survivors& s, int64_t checked) {
  bool quarter[4] = {};
  for (auto [i, b] : s.per_iteration) quarter[i * 4 / checked] = true;
  return quarter[0] && quarter[1] && quarter[2] && quarter[3];
}

// Which category, phase and module hold most of the survivors' bytes.
void kind_of(LeakSite& s, const Survivors& acc, const replay::Result& rr,
             const BlockCategories& bc) {
  std::unordered_map<uint64_t, int64_t> bytes;  // category << 40 | phase << 32 | module
  for (uint32_t b : acc.blocks) {
    const BlockClass& c = bc.blocks[b];
    bytes[static_cast<uint64_t>(c.category) << 40 | static_cast<uint64_t>(c.phase) << 32 |
          c.module] += rr.blocks[b].size;
  }
  uint64_t best = 0;
  int64_t most = -1;
  for (auto [key, v] : bytes)
    if (v > most || (v == most && key < best)) {
      best = key;
      most = v;
    }
  s.category = static_cast<Category>(best >> 40);
  s.made_in = phase_name(static_cast<Phase>((best >> 32) & 0xff));
  auto m = static_cast<uint32_t>(best);
  s.module = m == 0 ? "" : bc.modules[m - 1].empty() ? "(model)" : bc.modules[m - 1];
}

// Blocks made in a checked iteration and live at the end of the trace, by site.
std::vector<Survivors> survivors_by_site(const FrameClassifier& fc, const replay::Result& rr,
                                         const Iterations& its, int64_t checked) {
  const int64_t first = its.starts.front(), last = its.starts[static_cast<size_t>(checked)];
  std::unordered_map<StackId, size_t> site_of_stack;
  std::unordered_map<std::string, size_t> site_index;
  std::vector<Survivors> sites;
  for (uint32_t b = 0; b < rr.blocks.size(); ++b) {
    const replay::Lifetime& l = rr.blocks[b];
    if (l.free_requested != replay::Lifetime::kNever || l.alloc_event < first ||
        l.alloc_event >= last)
      continue;
    auto [at, fresh_stack] = site_of_stack.emplace(l.stack, 0);
    if (fresh_stack) {
      std::string label = fc.site_label(l.stack);
      auto [it, fresh] = site_index.emplace(label, sites.size());
      if (fresh) sites.push_back({std::move(label), l.stack, {}, {}});
      at->second = it->second;
    }
    Survivors& s = sites[at->second];
    const int64_t i = iteration_of(its, l.alloc_event);  // blocks come in allocation order
    if (s.per_iteration.empty() || s.per_iteration.back().first != i)
      s.per_iteration.emplace_back(i, 0);
    s.per_iteration.back().second += l.size;
    s.blocks.push_back(b);
  }
  return sites;
}

LeakSite leak_site(const Survivors& acc, int64_t checked, const FrameClassifier& fc,
                   const replay::Result& rr, const BlockCategories& bc, const Iterations& its) {
  LeakSite s;
  s.site = acc.label;
  auto f = fc.site(acc.stack);
  s.kind = f ? fc.kind(*f) : FrameKind::Internal;
  s.iterations_grown = static_cast<int64_t>(acc.per_iteration.size());
  s.bytes_per_iteration = rate_of(acc, checked);
  for (uint32_t b : acc.blocks) s.surviving_bytes += rr.blocks[b].size;
  s.surviving_count = static_cast<int64_t>(acc.blocks.size());
  for (auto it = acc.blocks.rbegin(); it != acc.blocks.rend() && s.newest.size() < kMaxNewest;
       ++it) {
    const replay::Lifetime& l = rr.blocks[*it];
    s.newest.push_back(
        {l.alloc_event, iteration_of(its, l.alloc_event), l.size, l.requested, l.stack});
  }
  s.stack = s.newest.front().stack;
  kind_of(s, acc, rr, bc);
  return s;
}

// The site to cite: that of most checked iterations' newest survivor (among
// the leaking sites), and that survivor's stack. It is where the likely root
// of what is kept was allocated, not what keeps it.
std::pair<std::string, StackId> newest_survivors_site(const std::vector<const Survivors*>& leaks,
                                                      const replay::Result& rr,
                                                      const Iterations& its, int64_t checked) {
  std::vector<std::pair<int64_t, size_t>> newest(checked, {-1, 0});  // event, index into leaks
  std::vector<StackId> stack(checked, 0);
  for (size_t k = 0; k < leaks.size(); ++k)
    for (uint32_t b : leaks[k]->blocks) {
      const replay::Lifetime& l = rr.blocks[b];
      int64_t i = iteration_of(its, l.alloc_event);
      if (l.alloc_event > newest[i].first) {
        newest[i] = {l.alloc_event, k};
        stack[i] = l.stack;
      }
    }
  std::vector<int64_t> votes(leaks.size(), 0);
  for (auto [ev, k] : newest)
    if (ev >= 0) ++votes[k];
  size_t cited = static_cast<size_t>(std::max_element(votes.begin(), votes.end()) - votes.begin());
  StackId cited_stack = leaks[cited]->stack;
  for (int64_t i = 0; i < checked; ++i)
    if (newest[i].first >= 0 && newest[i].second == cited) cited_stack = stack[i];
  return {leaks[cited]->label, cited_stack};
}

// Growth per site over the iterations: the leaking sites, then the largest
// at the start of the last iteration.
void growth_of(LeakReport& rep, const FrameClassifier& fc, const replay::Result& rr) {
  const Iterations& its = rep.iterations;
  std::vector<std::string> shown;
  for (const LeakSite& s : rep.sites)
    if (shown.size() < kMaxSeries) shown.push_back(s.site);
  const size_t leaking = shown.size();
  for (const SiteStat& s : group_sites(fc, rr, its.starts.back() - 1, kMaxSeries).sites) {
    if (shown.size() >= kMaxSeries) break;
    if (std::find(shown.begin(), shown.end(), s.site) == shown.end()) shown.push_back(s.site);
  }
  // By stack: 1 + index into shown, 0 none.
  std::unordered_map<StackId, size_t> series_of_stack;
  auto series_of = [&](uint32_t b) -> size_t {
    const replay::Lifetime& l = rr.blocks[b];
    if (l.alloc_event == replay::Lifetime::kBefore) return 0;
    auto [it, fresh] = series_of_stack.emplace(l.stack, 0);
    if (fresh) {
      auto pos = std::find(shown.begin(), shown.end(), fc.site_label(l.stack));
      it->second = pos == shown.end() ? 0 : static_cast<size_t>(pos - shown.begin()) + 1;
    }
    return it->second;
  };
  auto rows = live_at_starts(rr, its, shown.size(), series_of);
  rep.growth.push_back({"", false, std::move(rows[0])});
  for (size_t k = 0; k < shown.size(); ++k)
    rep.growth.push_back({shown[k], k < leaking, std::move(rows[k + 1])});
}

constexpr std::string_view kHowToRecord =
    "Record one across several steps: memsight.torch.record() (or "
    "torch.cuda.memory._record_memory_history()) before the loop, then dump the snapshot.";

// Why a device has no allocation history to compare ("" when it has one):
// none recorded, or (a state-only snapshot) only allocations into memory
// reserved before recording began.
std::string no_history(const Snapshot& snap, uint32_t begin, uint32_t end, const Iterations& its,
                       const replay::Result* rr) {
  const int64_t entries = end - begin;
  if (entries == 0)
    return "no allocation history was recorded on this device, so there are no iterations to "
           "compare. " +
           std::string(kHowToRecord);
  if (its.starts.size() >= 2 || rr->start.reserved <= 0 ||
      !alloc::allocations_only(snap.trace, begin, end))
    return "";
  return "no allocation history to compare: " +
         (entries == 1 ? std::string("the one trace entry is an allocation")
                       : "the " + count_text(entries) + " trace entries are allocations") +
         ", with no segment made and nothing freed, and all " + format_bytes(rr->start.reserved) +
         " reserved was there before recording began. " + std::string(kHowToRecord);
}

LeakReport leaks_of_device(const Snapshot& snap, size_t d, const FrameClassifier& fc,
                           const alloc::Settings& cfg, const std::vector<StorageTag>& tags,
                           ProcessMarks& marks) {
  LeakReport rep;
  rep.device = static_cast<int>(d);
  auto [begin, end] = snap.device_rows(d);
  rep.entries = end - begin;
  rep.verdict = LeakVerdict::NoTrace;
  if (rep.entries == 0) {
    rep.message = no_history(snap, begin, end, rep.iterations, nullptr);
    return rep;
  }
  rep.iterations = find_iterations(snap, d, marks);
  const Iterations& its = rep.iterations;
  const size_t n = its.complete();
  const replay::Result rr = replay::run(snap, d, cfg);
  if (rep.message = no_history(snap, begin, end, its, &rr); !rep.message.empty()) return rep;
  if (its.starts.size() < 2) {
    rep.verdict = LeakVerdict::NoIterations;
    rep.message =
        "no iterations found: no memsight.torch.mark_step(), torch.profiler step or "
        "optimizer step annotations, and no allocation that recurs at a steady interval";
    return rep;
  }
  if (n < kMinLeakIterations) {
    rep.verdict = LeakVerdict::TooFewIterations;
    rep.message = count_of(static_cast<int64_t>(n), "complete iteration") + " recorded: at least " +
                  std::to_string(kMinLeakIterations) +
                  " are needed to tell memory that keeps growing from memory made once and kept";
    growth_of(rep, fc, rr);
    return rep;
  }
  // Every complete iteration but the last is checked: the last one's memory
  // may be kept for the next, legitimately.
  const auto checked = static_cast<int64_t>(n - 1);
  rep.measured = checked;
  const std::vector<Survivors> sites = survivors_by_site(fc, rr, its, checked);
  std::vector<const Survivors*> leaks;
  for (const Survivors& s : sites)
    if (leaking(s, checked)) leaks.push_back(&s);
  if (leaks.empty()) {
    rep.verdict = LeakVerdict::None;
    rep.message = "no leak: no allocation site keeps memory from iteration to iteration (" +
                  count_of(checked, "iteration") + " checked)";
    growth_of(rep, fc, rr);
    return rep;
  }
  rep.verdict = LeakVerdict::Leak;
  const BlockCategories bc = classify_blocks(snap, d, rr, tags);
  for (const Survivors* s : leaks) rep.sites.push_back(leak_site(*s, checked, fc, rr, bc, its));
  std::vector<const Survivors*> by_rate;
  std::vector<size_t> order(leaks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return rep.sites[a].bytes_per_iteration > rep.sites[b].bytes_per_iteration;
  });
  std::vector<LeakSite> sorted;
  for (size_t i : order) {
    sorted.push_back(std::move(rep.sites[i]));
    by_rate.push_back(leaks[i]);
    rep.bytes_per_iteration += sorted.back().bytes_per_iteration;
  }
  rep.sites = std::move(sorted);
  std::tie(rep.alloc_site, rep.alloc_stack) = newest_survivors_site(by_rate, rr, its, checked);
  const LeakSite& cited = *std::find_if(rep.sites.begin(), rep.sites.end(), [&](const LeakSite& s) {
    return s.site == rep.alloc_site;
  });
  rep.advice = leak_advice(cited, rep.sites.size(), snap.top("memsight_holders") != nullptr);
  rep.message = "leak: " + format_bytes(rep.bytes_per_iteration) +
                " more stays allocated after each iteration, at " +
                count_of(static_cast<int64_t>(rep.sites.size()), "site") + "; allocated at " +
                rep.alloc_site;
  if (rep.sites.size() > kMaxSites) rep.sites.resize(kMaxSites);
  growth_of(rep, fc, rr);
  return rep;
}

}  // namespace

std::string_view leak_verdict_name(LeakVerdict v) {
  switch (v) {
    case LeakVerdict::Leak:
      return "leak";
    case LeakVerdict::None:
      return "none";
    case LeakVerdict::TooFewIterations:
      return "too few iterations";
    case LeakVerdict::NoIterations:
      return "no iterations";
    case LeakVerdict::NoTrace:
      break;
  }
  return "no trace";
}

Leaks find_leaks(const Snapshot& snap, const UserCode& user_code) {
  Leaks out;
  out.user_code = user_code.patterns;
  FrameClassifier fc(snap, user_code);
  const alloc::Settings cfg = alloc::Settings::recorded(snap);
  const std::vector<StorageTag> tags = read_tags(snap);
  const Holders holders = read_holders(snap);
  std::vector<bool> has_segments(snap.device_count(), false);
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && static_cast<size_t>(s.device) < has_segments.size())
      has_segments[s.device] = true;
  // Alike devices (analysis/alike/alike.h) keep one report.
  AlikeDevices alike;
  ProcessMarks marks(snap);
  for (size_t d = 0; d < snap.device_count(); ++d) {
    auto [begin, end] = snap.device_rows(d);
    if (begin == end && !has_segments[d]) continue;
    LeakReport rep = leaks_of_device(snap, d, fc, cfg, tags, marks);
    attach_holders(snap, holders, rep);
    uint64_t h = hash_mix(rep.entries, static_cast<uint64_t>(rep.verdict));
    h = hash_mix(h, static_cast<uint64_t>(rep.bytes_per_iteration));
    if (!alike.add(h, rep.device, [&](size_t g) { return alike_reports(out.devices[g], rep); }))
      out.devices.push_back(std::move(rep));
  }
  out.members = std::move(alike.members());
  return out;
}

}  // namespace memsight
