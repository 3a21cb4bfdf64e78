#pragma once
// What allocated in a profiler trace: memory events grouped by the op that
// asked and where Python called it, the largest groups, and what is live
// by group as allocations and frees come.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memsight/input_limits.h"
#include "memsight/profile.h"
#include "profile/python_sites.h"

namespace memsight::profile {

// What allocated: an op name (or none) and where Python called it. Groups
// are numbered in report order (op name, then site), so ties in bytes keep
// that order in every table; a group shows the stack of its first op.
class Groups {
 public:
  Groups(const Trace& t, PythonSites& py, const std::vector<int64_t>& op_of) : t_(t), py_(py) {
    of_mem_.assign(op_of.size(), 0);
    std::unordered_map<uint64_t, uint32_t> index;
    std::vector<Key> keys;
    for (size_t m = 0; m < op_of.size(); ++m) {
      if (t.mems[m].bytes <= 0) continue;  // only allocations are grouped
      int64_t o = op_of[m];
      int64_t name = o < 0 ? int64_t{-1} : int64_t{t.ops[static_cast<size_t>(o)].name};
      uint32_t desc = o < 0 ? 0 : py.of(static_cast<uint32_t>(o));
      uint32_t site = py.site_id(desc);
      uint64_t key = (static_cast<uint64_t>(name + 1) << 32) | site;
      auto [it, added] = index.try_emplace(key, static_cast<uint32_t>(keys.size()));
      if (added) keys.push_back({name, site, o, desc});
      Key& k = keys[it->second];
      if (o < k.first_op) k.first_op = o, k.desc = desc;
      of_mem_[m] = it->second;
    }
    std::vector<uint32_t> order(keys.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      std::string_view na = op_name(keys[a].name), nb = op_name(keys[b].name);
      if (na != nb) return na < nb;
      return py.site(keys[a].site) < py.site(keys[b].site);
    });
    std::vector<uint32_t> rank(keys.size());
    for (uint32_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
    // Frees and zero-size events have no group; their slot keeps 0 unread.
    for (size_t m = 0; m < of_mem_.size(); ++m)
      if (t.mems[m].bytes > 0) of_mem_[m] = rank[of_mem_[m]];
    for (uint32_t g : order) keys_.push_back(keys[g]);
  }
  size_t size() const { return keys_.size(); }
  uint32_t of_mem(size_t m) const { return of_mem_[m]; }
  OpBytes row(uint32_t g, int64_t bytes, int64_t count) const {
    OpBytes o;
    o.op = op_name(keys_[g].name);
    o.site = py_.site(keys_[g].site);
    o.stack = py_.stack(keys_[g].desc);
    o.bytes = bytes;
    o.count = count;
    return o;
  }

 private:
  std::string_view op_name(int64_t name) const {
    return name < 0 ? "(no op: allocated outside any recorded op)"
                    : t_.names.get(static_cast<StrId>(name));
  }
  struct Key {
    int64_t name;      // op name id, -1: no op
    uint32_t site;     // site id
    int64_t first_op;  // the group's first op (-1: none), whose stack it shows
    uint32_t desc;     // that op's call description
  };
  const Trace& t_;
  PythonSites& py_;
  std::vector<uint32_t> of_mem_;  // the group of each memory event
  std::vector<Key> keys_;         // by group, in report order
};

// Bytes by group, largest first (ties in report order), at most `keep` rows.
inline std::vector<OpBytes> top_bytes(
    const std::unordered_map<uint32_t, std::pair<int64_t, int64_t>>& by, const Groups& groups,
    size_t keep) {
  std::vector<std::pair<int64_t, uint32_t>> order;
  for (const auto& [g, v] : by) order.emplace_back(-v.first, g);
  size_t n = std::min(keep, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(n), order.end());
  std::vector<OpBytes> out;
  for (size_t i = 0; i < n; ++i) {
    const auto& v = by.at(order[i].second);
    out.push_back(groups.row(order[i].second, v.first, v.second));
  }
  return out;
}

// What is live on a device, by group, kept ordered as allocations and frees
// come: reading the largest groups at a step's peak costs a few steps of a
// tree, however many steps the trace has and however much is live.
class LiveByGroup {
 public:
  explicit LiveByGroup(size_t groups) : bytes_(groups, 0), count_(groups, 0) {}
  void alloc(int64_t addr, int64_t bytes, uint32_t g) {
    auto [it, added] = live_.try_emplace(addr, bytes, g);
    if (!added) {  // allocated again without a free: the old block is gone
      change(it->second.second, -it->second.first, -1);
      it->second = {bytes, g};
    }
    change(g, bytes, 1);
  }
  void free(int64_t addr) {
    auto it = live_.find(addr);
    if (it == live_.end()) return;
    change(it->second.second, -it->second.first, -1);
    live_.erase(it);
  }
  // The rows of what is live: the seven largest groups and the rest as one
  // row, so the rows add up to what the trace saw allocated.
  std::vector<OpBytes> rows(const Groups& groups, int64_t& known) const {
    known = total_;
    std::vector<OpBytes> out;
    size_t n = order_.size() > 8 ? 7 : order_.size();
    int64_t rest_bytes = total_, rest_count = total_count_;
    auto it = order_.begin();
    for (size_t i = 0; i < n; ++i, ++it) {
      uint32_t g = it->second;
      out.push_back(groups.row(g, bytes_[g], count_[g]));
      rest_bytes = add_saturated(rest_bytes, -bytes_[g]);
      rest_count -= count_[g];
    }
    if (order_.size() > n) {
      OpBytes rest;
      rest.op = "(" + std::to_string(order_.size() - n) + " more ops)";
      rest.bytes = rest_bytes;
      rest.count = rest_count;
      out.push_back(std::move(rest));
    }
    return out;
  }

 private:
  void change(uint32_t g, int64_t db, int64_t dc) {
    if (bytes_[g] > 0) order_.erase({-bytes_[g], g});
    bytes_[g] = add_saturated(bytes_[g], db);
    count_[g] += dc;
    total_ = add_saturated(total_, db);
    total_count_ += dc;
    if (bytes_[g] > 0) order_.insert({-bytes_[g], g});
  }
  std::unordered_map<int64_t, std::pair<int64_t, uint32_t>> live_;  // addr -> (bytes, group)
  std::vector<int64_t> bytes_, count_;
  std::set<std::pair<int64_t, uint32_t>> order_;  // (-bytes, group) of groups holding bytes
  int64_t total_ = 0, total_count_ = 0;
};

}  // namespace memsight::profile
