#include "analysis/sites.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace memsight {

SiteGroups group_sites(const FrameClassifier& fc, const replay::Result& rr, int64_t event) {
  SiteGroups g;
  std::unordered_map<StackId, std::string> label;
  std::map<std::string, SiteStat> sites;
  for (const replay::Lifetime& l : rr.blocks) {
    if (l.alloc_event > event || l.free_requested <= event) continue;
    if (l.alloc_event == replay::Lifetime::kBefore) {
      g.before_bytes += l.size;
      ++g.before_count;
      continue;
    }
    auto it = label.find(l.stack);
    if (it == label.end()) it = label.emplace(l.stack, fc.site_label(l.stack)).first;
    SiteStat& s = sites[it->second];
    if (s.count == 0 || l.stack < s.stack) s.stack = l.stack;
    s.bytes += l.size;
    ++s.count;
  }
  for (auto& [name, s] : sites) {
    s.site = name;
    auto f = fc.site(s.stack);
    s.kind = f ? fc.kind(*f) : FrameKind::Internal;
    g.sites.push_back(std::move(s));
  }
  std::sort(g.sites.begin(), g.sites.end(), [](const SiteStat& a, const SiteStat& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
  });
  return g;
}

}  // namespace memsight
