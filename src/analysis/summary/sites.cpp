#include "analysis/summary/sites.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace memsight {

SiteGroups group_sites(const FrameClassifier& fc, const replay::Result& rr, int64_t event,
                       size_t keep, bool state_only) {
  SiteGroups g;
  // Sites by their label, unbuilt: a snapshot may give thousands of stacks
  // labels of a megabyte each (one long name, shared through the memo).
  std::unordered_map<StackId, uint32_t> site_of;
  std::unordered_map<Label, uint32_t, Label::Hash> index;
  std::vector<Label> labels;
  std::vector<SiteStat> sites;
  for (size_t i = 0, n = replay::allocated_by(rr, event); i < n; ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    if (l.free_requested <= event) continue;
    if (l.alloc_event == replay::Lifetime::kBefore && !(state_only && l.stack)) {
      g.before_bytes += l.size;
      ++g.before_count;
      continue;
    }
    auto it = site_of.find(l.stack);
    if (it == site_of.end()) {
      Label label = fc.site_key(l.stack);
      auto [at, added] = index.try_emplace(label, static_cast<uint32_t>(sites.size()));
      if (added) {
        labels.push_back(label);
        sites.emplace_back();
      }
      it = site_of.emplace(l.stack, at->second).first;
    }
    SiteStat& s = sites[it->second];
    if (s.count == 0 || l.stack < s.stack) s.stack = l.stack;
    s.bytes += l.size;
    ++s.count;
  }
  std::vector<uint32_t> order(sites.size());
  std::iota(order.begin(), order.end(), 0);
  auto first = [&](uint32_t a, uint32_t b) {
    return sites[a].bytes != sites[b].bytes ? sites[a].bytes > sites[b].bytes
                                            : labels[a] < labels[b];
  };
  size_t n = std::min(keep, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(n), order.end(), first);
  g.total = sites.size();
  for (size_t k = 0; k < n; ++k) {
    SiteStat& s = sites[order[k]];
    s.site = labels[order[k]].text();
    auto f = fc.site(s.stack);
    s.kind = f ? fc.kind(*f) : FrameKind::Internal;
    g.sites.push_back(std::move(s));
  }
  return g;
}

}  // namespace memsight
