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
#include <algorithm>
#include <unordered_map>

#include "analysis/classify.h"
#include "analysis/replay.h"
#include "analysis/sites.h"
#include "memsight/leaks.h"

namespace memsight {
namespace {

constexpr size_t kMaxSeries = 8;   // site curves for the page
constexpr size_t kMaxNewest = 5;   // survivors listed per site
constexpr size_t kMaxSites = 50;   // leaking sites reported

struct SiteAcc {
  std::string label;
  StackId stack = 0;
  std::vector<int64_t> per_iteration;  // surviving bytes by measured iteration
  std::vector<uint32_t> blocks;        // survivors, as indices into replay blocks
};

// Live bytes at each iteration start: of all blocks (series 0) and of
// those series_of(block) puts in series 1..k. A block counts from the first
// start after its allocation up to its free_requested.
template <class SeriesOf>
std::vector<std::vector<int64_t>> live_at_starts(const replay::Result& rr,
                                                 const std::vector<int64_t>& starts, size_t k,
                                                 SeriesOf series_of) {
  std::vector<std::vector<int64_t>> diff(k + 1, std::vector<int64_t>(starts.size() + 1, 0));
  for (uint32_t i = 0; i < rr.blocks.size(); ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    auto from = std::upper_bound(starts.begin(), starts.end(), l.alloc_event) - starts.begin();
    auto to = std::upper_bound(starts.begin(), starts.end(), l.free_requested) - starts.begin();
    if (l.free_requested == replay::Lifetime::kBefore || from >= to) continue;
    for (size_t s : {size_t{0}, series_of(i)}) {
      if (s > k) continue;
      diff[s][from] += l.size;
      diff[s][to] -= l.size;
      if (s == 0 && k == 0) break;
    }
  }
  for (auto& d : diff) {
    int64_t run = 0;
    for (size_t j = 0; j < starts.size(); ++j) d[j] = run += d[j];
    d.pop_back();
  }
  return diff;
}

int64_t rate_of(std::vector<int64_t> per_iteration, int64_t grown) {
  const auto m = static_cast<int64_t>(per_iteration.size());
  int64_t total = 0;
  for (int64_t v : per_iteration) total += v;
  if (grown < m) return (total + m / 2) / m;  // not every iteration: the average
  // Every iteration: the typical amount, whatever one of them added besides.
  auto mid = per_iteration.begin() + m / 2;
  std::nth_element(per_iteration.begin(), mid, per_iteration.end());
  return *mid;
}

// Which category, phase and module hold most of the survivors' bytes.
void kind_of(LeakSite& s, const SiteAcc& acc, const replay::Result& rr,
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

LeakReport leaks_of_device(const Snapshot& snap, size_t d, const FrameClassifier& fc,
                           const replay::Config& cfg, const std::vector<StorageTag>& tags) {
  LeakReport rep;
  rep.device = static_cast<int>(d);
  rep.entries = d < snap.device_count() ? snap.device_rows(d).second - snap.device_rows(d).first
                                        : 0;
  if (rep.entries == 0) {
    rep.verdict = "no trace";
    rep.message = "no allocation history was recorded on this device, so there are no iterations "
                  "to compare";
    return rep;
  }
  rep.iterations = find_iterations(snap, d);
  const Iterations& its = rep.iterations;
  const size_t n = its.complete();
  const replay::Result rr = replay::run(snap, d, cfg);
  auto no_site = [](uint32_t) { return SIZE_MAX; };
  if (!its.starts.empty())
    rep.growth.push_back({"", false, live_at_starts(rr, its.starts, 0, no_site)[0]});
  if (its.starts.size() < 2) {
    rep.verdict = "no iterations";
    rep.message = "no iterations found: no memsight.torch.mark_step(), torch.profiler step or "
                  "optimizer step annotations, and no allocation that recurs at a steady interval";
    return rep;
  }
  if (n < kMinLeakIterations) {
    rep.verdict = "too few iterations";
    rep.message = std::to_string(n) + " complete iteration" + (n == 1 ? "" : "s") +
                  " recorded: at least " + std::to_string(kMinLeakIterations) +
                  " are needed to tell memory that keeps growing from memory made once and kept";
    return rep;
  }
  const auto m = static_cast<int64_t>(n - 1);
  rep.measured = m;
  const int64_t first = its.starts[0], last = its.starts[n - 1];

  // Survivors by site.
  std::vector<int32_t> site_of_stack(snap.frames.stack_count(), -1);
  std::unordered_map<std::string, int32_t> site_index;
  std::vector<SiteAcc> sites;
  for (uint32_t b = 0; b < rr.blocks.size(); ++b) {
    const replay::Lifetime& l = rr.blocks[b];
    if (l.free_requested != replay::Lifetime::kNever || l.alloc_event < first ||
        l.alloc_event >= last)
      continue;
    int32_t& si = site_of_stack[l.stack];
    if (si < 0) {
      std::string label = fc.site_label(l.stack);
      auto [it, fresh] = site_index.emplace(label, static_cast<int32_t>(sites.size()));
      if (fresh) sites.push_back({std::move(label), l.stack, std::vector<int64_t>(m, 0), {}});
      si = it->second;
    }
    auto i = std::upper_bound(its.starts.begin(), its.starts.end(), l.alloc_event) -
             its.starts.begin() - 1;
    sites[si].per_iteration[i] += l.size;
    sites[si].blocks.push_back(b);
  }

  // Leaking: survivors from every quarter of the measured iterations.
  BlockCategories bc;
  bool classified = false;
  std::vector<int32_t> leaking;
  for (size_t si = 0; si < sites.size(); ++si) {
    const SiteAcc& acc = sites[si];
    bool quarter[4] = {};
    int64_t grown = 0;
    for (int64_t i = 0; i < m; ++i)
      if (acc.per_iteration[i]) {
        quarter[i * 4 / m] = true;
        ++grown;
      }
    if (!(quarter[0] && quarter[1] && quarter[2] && quarter[3])) continue;
    if (!classified) {
      bc = classify_blocks(snap, d, rr, tags);
      classified = true;
    }
    LeakSite s;
    s.site = acc.label;
    auto f = fc.site(acc.stack);
    s.kind = f ? fc.kind(*f) : FrameKind::Internal;
    s.iterations_grown = grown;
    s.bytes_per_iteration = rate_of(acc.per_iteration, grown);
    for (uint32_t b : acc.blocks) {
      s.surviving_bytes += rr.blocks[b].size;
      ++s.surviving_count;
    }
    // Blocks are in allocation order: the newest survivors are the last.
    for (auto it = acc.blocks.rbegin(); it != acc.blocks.rend() && s.newest.size() < kMaxNewest;
         ++it) {
      const replay::Lifetime& l = rr.blocks[*it];
      auto i = std::upper_bound(its.starts.begin(), its.starts.end(), l.alloc_event) -
               its.starts.begin() - 1;
      s.newest.push_back({l.alloc_event, i, l.size, l.requested, l.stack});
    }
    s.stack = s.newest.front().stack;
    kind_of(s, acc, rr, bc);
    rep.sites.push_back(std::move(s));
    leaking.push_back(static_cast<int32_t>(si));
  }
  std::vector<size_t> order(rep.sites.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return rep.sites[a].bytes_per_iteration > rep.sites[b].bytes_per_iteration;
  });
  std::vector<LeakSite> sorted;
  std::vector<int32_t> leaking_sorted;
  for (size_t i : order) {
    sorted.push_back(std::move(rep.sites[i]));
    leaking_sorted.push_back(leaking[i]);
  }
  rep.sites = std::move(sorted);
  leaking = std::move(leaking_sorted);
  for (const LeakSite& s : rep.sites) rep.bytes_per_iteration += s.bytes_per_iteration;

  if (rep.sites.empty()) {
    rep.verdict = "none";
    rep.message = "no leak: no allocation site keeps memory from iteration to iteration (" +
                  std::to_string(m) + " iterations checked)";
  } else {
    rep.verdict = "leak";
    // The line to fix: the site of most iterations' newest survivor.
    std::vector<std::pair<int64_t, uint32_t>> newest(m, {-1, 0});  // per iteration: event, block
    for (int32_t si : leaking)
      for (uint32_t b : sites[si].blocks) {
        const replay::Lifetime& l = rr.blocks[b];
        auto i = std::upper_bound(its.starts.begin(), its.starts.end(), l.alloc_event) -
                 its.starts.begin() - 1;
        if (l.alloc_event > newest[i].first) newest[i] = {l.alloc_event, b};
      }
    std::unordered_map<int32_t, int64_t> votes;
    for (auto [ev, b] : newest)
      if (ev >= 0) ++votes[site_of_stack[rr.blocks[b].stack]];
    int32_t fix = leaking.front();
    for (int32_t si : leaking)
      if (votes[si] > votes[fix]) fix = si;
    rep.fix_site = sites[fix].label;
    for (auto [ev, b] : newest)
      if (ev >= 0 && site_of_stack[rr.blocks[b].stack] == fix) rep.fix_stack = rr.blocks[b].stack;
    if (rep.sites.size() > kMaxSites) rep.sites.resize(kMaxSites);
  }

  // Growth per site over the iterations: the leaking sites, then the
  // largest at the start of the last iteration.
  std::vector<std::string> shown;
  for (const LeakSite& s : rep.sites)
    if (shown.size() < kMaxSeries) shown.push_back(s.site);
  SiteGroups largest = group_sites(fc, rr, its.starts.back() - 1);
  for (const SiteStat& s : largest.sites) {
    if (shown.size() >= kMaxSeries) break;
    if (std::find(shown.begin(), shown.end(), s.site) == shown.end()) shown.push_back(s.site);
  }
  // Series of each stack: 0 unknown yet, SIZE_MAX none, else 1 + index into shown.
  std::vector<size_t> series_of_stack(snap.frames.stack_count(), 0);
  auto series_of = [&](uint32_t b) {
    const replay::Lifetime& l = rr.blocks[b];
    if (l.alloc_event == replay::Lifetime::kBefore) return SIZE_MAX;
    size_t& s = series_of_stack[l.stack];
    if (s == 0) {
      auto pos = std::find(shown.begin(), shown.end(), fc.site_label(l.stack));
      s = pos == shown.end() ? SIZE_MAX : static_cast<size_t>(pos - shown.begin()) + 1;
    }
    return s;
  };
  auto series = live_at_starts(rr, its.starts, shown.size(), series_of);
  rep.growth.clear();
  rep.growth.push_back({"", false, std::move(series[0])});
  for (size_t k = 0; k < shown.size(); ++k)
    rep.growth.push_back({shown[k], k < rep.sites.size(), std::move(series[k + 1])});
  return rep;
}

}  // namespace

Leaks find_leaks(const Snapshot& snap, const UserCode& user_code) {
  Leaks out;
  out.user_code = user_code.patterns;
  FrameClassifier fc(snap, user_code);
  const replay::Config cfg = replay::Config::from(snap);
  const std::vector<StorageTag> tags = read_tags(snap);
  std::vector<bool> has_segments(snap.device_count(), false);
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && static_cast<size_t>(s.device) < has_segments.size())
      has_segments[s.device] = true;
  for (size_t d = 0; d < snap.device_count(); ++d) {
    auto [begin, end] = snap.device_rows(d);
    if (begin == end && !has_segments[d]) continue;
    out.devices.push_back(leaks_of_device(snap, d, fc, cfg, tags));
  }
  return out;
}

}  // namespace memsight
