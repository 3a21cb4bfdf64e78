// analyze_profile: per profiler step and device, the allocator's peaks from
// the [memory] events, what was live at the peak and what allocated most
// (by the op that asked, and where Python called it), and the ops and
// kernels that took the time.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

#include "memsight/profile.h"

namespace memsight {
namespace {

using Trace = ProfileTrace;

// "ProfilerStep#12" -> 12, else -1.
int64_t step_number(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!name.starts_with(kPrefix)) return -1;
  int64_t n = -1;
  auto [p, ec] = std::from_chars(name.data() + kPrefix.size(), name.data() + name.size(), n);
  return ec == std::errc() && p == name.data() + name.size() ? n : -1;
}

// The innermost span of `spans` (sorted by start, outer before inner at equal
// starts) on each thread that contains each query time: a sweep per thread.
template <typename Span>
std::vector<int64_t> innermost(const std::vector<Span>& spans, const std::vector<int64_t>& q_tid,
                               const std::vector<double>& q_ts) {
  std::vector<int64_t> out(q_ts.size(), -1);
  std::unordered_map<int64_t, std::vector<uint32_t>> by_tid_spans, by_tid_q;
  for (uint32_t i = 0; i < spans.size(); ++i) by_tid_spans[spans[i].tid].push_back(i);
  for (uint32_t i = 0; i < q_ts.size(); ++i) by_tid_q[q_tid[i]].push_back(i);
  for (auto& [tid, qs] : by_tid_q) {
    auto it = by_tid_spans.find(tid);
    if (it == by_tid_spans.end()) continue;
    auto& ss = it->second;
    std::sort(ss.begin(), ss.end(), [&](uint32_t a, uint32_t b) {
      return spans[a].ts != spans[b].ts ? spans[a].ts < spans[b].ts : spans[a].dur > spans[b].dur;
    });
    std::sort(qs.begin(), qs.end(), [&](uint32_t a, uint32_t b) { return q_ts[a] < q_ts[b]; });
    std::vector<uint32_t> open;
    size_t next = 0;
    for (uint32_t q : qs) {
      double t = q_ts[q];
      while (next < ss.size() && spans[ss[next]].ts <= t) {
        const Span& s = spans[ss[next]];
        while (!open.empty() && spans[open.back()].ts + spans[open.back()].dur < s.ts)
          open.pop_back();
        open.push_back(ss[next++]);
      }
      while (!open.empty() && spans[open.back()].ts + spans[open.back()].dur < t) open.pop_back();
      if (!open.empty()) out[q] = open.back();
    }
  }
  return out;
}

// Where Python called each op: the frame rule over its python_function
// ancestors ("path/file.py(LINE): name"), computed once per innermost Python
// call. A call's description is its site (interned: calls from one line of
// the user's code share it) and its stack text.
class PythonSites {
 public:
  PythonSites(const Trace& t, const UserCode& uc) : t_(t), uc_(uc) {
    for (uint32_t i = 0; i < t.pycalls.size(); ++i)
      if (t.pycalls[i].id >= 0) by_id_[t.pycalls[i].id] = i;
    sites_.push_back("");  // 0: no Python stack
    index_[""] = 0;
    calls_.push_back({0, ""});
  }
  void locate(const std::vector<uint32_t>& ops) {
    std::vector<int64_t> tid;
    std::vector<double> ts;
    for (uint32_t o : ops) {
      tid.push_back(t_.ops[o].tid);
      ts.push_back(t_.ops[o].ts);
    }
    auto inner = innermost(t_.pycalls, tid, ts);
    for (size_t i = 0; i < ops.size(); ++i) call_of_[ops[i]] = inner[i];
  }
  // The description of op o's call (0: its thread ran no Python).
  uint32_t of(uint32_t op) {
    auto c = call_of_.find(op);
    int64_t call = c == call_of_.end() ? -1 : c->second;
    if (call < 0) return 0;
    auto cached = by_call_.find(call);
    if (cached != by_call_.end()) return cached->second;
    auto [site, stack] = describe(call);
    auto [it, added] = index_.try_emplace(site, static_cast<uint32_t>(sites_.size()));
    if (added) sites_.push_back(std::move(site));
    calls_.push_back({it->second, std::move(stack)});
    return by_call_[call] = static_cast<uint32_t>(calls_.size() - 1);
  }
  // A description's site id (0: none); a site's text; a description's stack.
  uint32_t site_id(uint32_t desc) const { return calls_[desc].site; }
  const std::string& site(uint32_t site_id) const { return sites_[site_id]; }
  const std::string& stack(uint32_t desc) const { return calls_[desc].stack; }

 private:
  // (site, stack text) of a Python call and its ancestors.
  std::pair<std::string, std::string> describe(int64_t call) const {
    std::vector<std::string> names, files;
    std::vector<int64_t> lines;
    for (int64_t i = call; i >= 0 && names.size() < 256;) {
      const auto& pc = t_.pycalls[static_cast<size_t>(i)];
      std::string_view text = t_.names.get(pc.name);
      size_t open = text.find('('), close = text.find("): ");
      if (open != std::string_view::npos && close != std::string_view::npos && open < close) {
        files.emplace_back(text.substr(0, open));
        int64_t line = 0;
        std::from_chars(text.data() + open + 1, text.data() + close, line);
        lines.push_back(line);
        names.emplace_back(text.substr(close + 3));
      } else {  // "<built-in ...>", "nn.Module: X": no file
        files.emplace_back();
        lines.push_back(0);
        names.emplace_back(text);
      }
      auto p = by_id_.find(pc.parent);
      i = pc.parent >= 0 && p != by_id_.end() ? static_cast<int64_t>(p->second) : -1;
    }
    std::vector<FrameKind> kinds;
    for (size_t i = 0; i < names.size(); ++i)
      kinds.push_back(classify_frame(names[i], files[i], uc_));
    std::pair<std::string, std::string> out;
    int site = site_index(kinds);
    if (site >= 0) {
      auto s = static_cast<size_t>(site);
      out.first = frame_label(names[s], files[s], lines[s]);
      out.second = describe_kinds(
          kinds, 3, [&](size_t i) { return frame_label(names[i], files[i], lines[i]); });
    }
    return out;
  }

  const Trace& t_;
  const UserCode& uc_;
  std::unordered_map<int64_t, uint32_t> by_id_;
  std::unordered_map<uint32_t, int64_t> call_of_;
  std::unordered_map<int64_t, uint32_t> by_call_;
  std::unordered_map<std::string, uint32_t> index_;  // site text -> id
  std::vector<std::string> sites_;
  struct Described {
    uint32_t site;
    std::string stack;
  };
  std::vector<Described> calls_;
};

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
std::vector<OpBytes> top_bytes(const std::unordered_map<uint32_t, std::pair<int64_t, int64_t>>& by,
                               const Groups& groups, size_t keep) {
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

std::vector<NameTime> top_times(std::unordered_map<StrId, NameTime>& by, const Trace& t,
                                size_t keep) {
  std::vector<NameTime> out;
  for (auto& [id, nt] : by) {
    nt.name = t.names.get(id);
    out.push_back(nt);
  }
  std::sort(out.begin(), out.end(), [](const NameTime& a, const NameTime& b) {
    return a.total_us != b.total_us ? a.total_us > b.total_us : a.name < b.name;
  });
  if (out.size() > keep) out.resize(keep);
  return out;
}

constexpr InputReason kBadStep{"ProfilerStep annotation", "ProfilerStep annotations",
                               "ignored: no step number in 0..2^63-1 after the '#'"};
// Steps x devices rows beyond this list only the devices with memory events
// during the step (a device's totals carry over unchanged through the rest).
constexpr size_t kMaxStepDevices = 4'000'000;
constexpr InputReason kQuietDevices{
    "step row of a device", "step rows of devices",
    "left out: the device had no memory event during the step, and the trace has more than "
    "4,000,000 steps times devices"};

}  // namespace

ProfileReport analyze_profile(const ProfileTrace& t, const UserCode& user_code) {
  ProfileReport rep;
  rep.events = t.events;
  rep.device_names = t.device_names;
  rep.has_memory = !t.mems.empty();
  rep.has_stacks = !t.pycalls.empty();
  rep.notes = t.notes;

  // Steps: the ProfilerStep#N annotations, else the whole trace. A number
  // seen more than once gives one step per span, labelled by occurrence.
  for (const auto& a : t.annotations) {
    std::string_view name = t.names.get(a.name);
    if (int64_t n = step_number(name); n >= 0)
      rep.steps.push_back({n, 1, 1, a.ts, a.dur, {}, {}, {}});
    else if (name.starts_with("ProfilerStep#"))
      rep.notes.add(kBadStep);
  }
  std::stable_sort(rep.steps.begin(), rep.steps.end(),
                   [](const ProfileStep& a, const ProfileStep& b) { return a.ts < b.ts; });
  {
    std::unordered_map<int64_t, int64_t> seen;
    for (ProfileStep& s : rep.steps) s.occurrence = ++seen[s.step];
    for (ProfileStep& s : rep.steps) s.occurrences = seen[s.step];
  }
  double lo = 1e300, hi = -1e300;
  for (const auto& o : t.ops) lo = std::min(lo, o.ts), hi = std::max(hi, o.ts + o.dur);
  for (const auto& m : t.mems) lo = std::min(lo, m.ts), hi = std::max(hi, m.ts);
  if (lo > hi) lo = hi = 0;
  rep.t0 = rep.steps.empty() ? lo : std::min(lo, rep.steps.front().ts);
  if (rep.steps.empty()) rep.steps.push_back({-1, 1, 1, lo, hi - lo + 1e-3, {}, {}, {}});
  auto step_of = [&](double ts) -> int64_t {
    auto it = std::upper_bound(rep.steps.begin(), rep.steps.end(), ts,
                               [](double v, const ProfileStep& s) { return v < s.ts; });
    if (it == rep.steps.begin()) return -1;
    --it;
    return ts < it->ts + it->dur ? it - rep.steps.begin() : -1;
  };

  // The op of each memory event: the innermost cpu_op around it on its thread.
  std::vector<int64_t> q_tid;
  std::vector<double> q_ts;
  for (const auto& m : t.mems) {
    q_tid.push_back(m.tid);
    q_ts.push_back(m.ts);
  }
  std::vector<int64_t> op_of = innermost(t.ops, q_tid, q_ts);
  PythonSites py(t, user_code);
  {
    std::vector<uint32_t> ops;
    for (size_t m = 0; m < op_of.size(); ++m)
      if (op_of[m] >= 0 && t.mems[m].bytes > 0) ops.push_back(static_cast<uint32_t>(op_of[m]));
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    py.locate(ops);
  }
  const Groups groups(t, py, op_of);

  // Memory, device by device, in time order.
  std::map<int, std::vector<uint32_t>> by_dev;
  for (uint32_t i = 0; i < t.mems.size(); ++i)
    if (t.mems[i].device >= 0) by_dev[t.mems[i].device].push_back(i);
  const bool list_quiet = rep.steps.size() * by_dev.size() <= kMaxStepDevices;
  for (auto& [dev, idx] : by_dev) {
    std::stable_sort(idx.begin(), idx.end(),
                     [&](uint32_t a, uint32_t b) { return t.mems[a].ts < t.mems[b].ts; });
    struct Acc {
      StepDevice sd;
      int64_t capture = -1;  // position in idx after which the peak holds (-1: before the first)
      int64_t events = 0;    // memory events of the device during the step
      std::unordered_map<uint32_t, std::pair<int64_t, int64_t>> most;  // group -> (bytes, count)
    };
    std::vector<Acc> acc(rep.steps.size());
    int64_t cur_a = 0, cur_r = 0;  // allocator totals after the last event seen
    size_t started = 0;            // steps begun before the current event (steps are in time order)
    for (size_t k = 0; k < idx.size(); ++k) {
      const auto& m = t.mems[idx[k]];
      int64_t s = step_of(m.ts);
      // Steps begun before this event start from the totals so far.
      for (; started < rep.steps.size() && rep.steps[started].ts <= m.ts; ++started) {
        Acc& a = acc[started];
        a.sd.peak_allocated = cur_a;
        a.sd.peak_reserved = cur_r;
        a.sd.peak_ts = rep.steps[started].ts;
        a.capture = static_cast<int64_t>(k) - 1;
      }
      cur_a = m.total_allocated;
      cur_r = m.total_reserved;
      if (s < 0) continue;
      Acc& a = acc[static_cast<size_t>(s)];
      ++a.events;
      if (m.total_allocated > a.sd.peak_allocated) {
        a.sd.peak_allocated = m.total_allocated;
        a.sd.peak_ts = m.ts;
        a.capture = static_cast<int64_t>(k);
      }
      a.sd.peak_reserved = std::max(a.sd.peak_reserved, m.total_reserved);
      if (m.bytes > 0) {
        ++a.sd.allocs;
        a.sd.alloc_bytes = add_saturated(a.sd.alloc_bytes, m.bytes);
        auto& v = a.most[groups.of_mem(idx[k])];
        v.first = add_saturated(v.first, m.bytes);
        ++v.second;
      } else if (m.bytes < 0) {
        ++a.sd.frees;
        a.sd.free_bytes = add_saturated(a.sd.free_bytes, -m.bytes);
      }
    }
    for (; started < rep.steps.size(); ++started) {  // no event after it began
      acc[started].sd.peak_allocated = cur_a;
      acc[started].sd.peak_reserved = cur_r;
      acc[started].capture = static_cast<int64_t>(idx.size()) - 1;
    }
    // What was live at each step's peak: one replay of the device's events,
    // stopping by at each capture point.
    std::vector<std::pair<int64_t, size_t>> captures;
    for (size_t j = 0; j < acc.size(); ++j)
      if (list_quiet || acc[j].events) captures.emplace_back(acc[j].capture, j);
    std::sort(captures.begin(), captures.end());
    LiveByGroup live(groups.size());
    size_t ci = 0;
    auto take = [&](size_t j) {
      int64_t known = 0;
      StepDevice& sd = acc[j].sd;
      sd.live_at_peak = live.rows(groups, known);
      if (sd.peak_allocated > known) {  // allocated before the profile began
        OpBytes o;
        o.op = "(allocated before the profile began)";
        o.bytes = sd.peak_allocated - known;
        sd.live_at_peak.push_back(o);
      }
    };
    while (ci < captures.size() && captures[ci].first < 0) take(captures[ci++].second);
    for (size_t k = 0; k < idx.size() && ci < captures.size(); ++k) {
      const auto& m = t.mems[idx[k]];
      if (m.bytes > 0)
        live.alloc(m.addr, m.bytes, groups.of_mem(idx[k]));
      else if (m.bytes < 0)
        live.free(m.addr);
      while (ci < captures.size() && captures[ci].first == static_cast<int64_t>(k))
        take(captures[ci++].second);
    }
    for (size_t j = 0; j < acc.size(); ++j) {
      if (!list_quiet && !acc[j].events) {
        rep.notes.add(kQuietDevices);
        continue;
      }
      acc[j].sd.device = dev;
      acc[j].sd.allocated_most = top_bytes(acc[j].most, groups, 8);
      rep.steps[j].devices.push_back(std::move(acc[j].sd));
    }
    // The curve: at most ~4000 points, each bucket's highest.
    ProfileReport::Curve c;
    c.device = dev;
    size_t bucket = std::max<size_t>(1, idx.size() / 4000 + 1);
    for (size_t k = 0; k < idx.size(); k += bucket) {
      size_t best = k;
      int64_t res = 0;
      for (size_t q = k; q < std::min(idx.size(), k + bucket); ++q) {
        if (t.mems[idx[q]].total_allocated > t.mems[idx[best]].total_allocated) best = q;
        res = std::max(res, t.mems[idx[q]].total_reserved);
      }
      c.ts.push_back(t.mems[idx[best]].ts);
      c.allocated.push_back(t.mems[idx[best]].total_allocated);
      c.reserved.push_back(res);
    }
    rep.curves.push_back(std::move(c));
  }

  // Time: ops by CPU time (inclusive) and kernels by GPU time, per step.
  std::vector<std::unordered_map<StrId, NameTime>> ops(rep.steps.size()), kern(rep.steps.size());
  for (const auto& o : t.ops)
    if (int64_t s = step_of(o.ts); s >= 0) {
      NameTime& nt = ops[static_cast<size_t>(s)][o.name];
      nt.total_us += o.dur;
      ++nt.count;
    }
  std::unordered_map<int64_t, double> launch(t.launches.begin(), t.launches.end());
  for (const auto& k : t.kernels) {
    auto it = launch.find(k.correlation);
    if (int64_t s = step_of(it == launch.end() ? k.ts : it->second); s >= 0) {
      NameTime& nt = kern[static_cast<size_t>(s)][k.name];
      nt.total_us += k.dur;
      ++nt.count;
    }
  }
  for (size_t j = 0; j < rep.steps.size(); ++j) {
    rep.steps[j].top_ops = top_times(ops[j], t, 10);
    rep.steps[j].top_kernels = top_times(kern[j], t, 10);
  }
  return rep;
}

}  // namespace memsight
