// analyze_profile: per profiler step and device, the allocator's peaks from
// the [memory] events, what was live at the peak and what allocated most
// (by the op that asked, and where Python called it), and the ops and
// kernels that took the time.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
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
// ancestors ("path/file.py(LINE): name"), computed once per op.
class PythonSites {
 public:
  PythonSites(const Trace& t, const UserCode& uc) : t_(t), uc_(uc) {
    for (uint32_t i = 0; i < t.pycalls.size(); ++i)
      if (t.pycalls[i].id >= 0) by_id_[t.pycalls[i].id] = i;
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
  // (site, stack text) for op o; empty when its thread ran no Python.
  std::pair<std::string, std::string> of(uint32_t op) {
    auto cached = cache_.find(op);
    if (cached != cache_.end()) return cached->second;
    std::vector<std::string> names, files;
    std::vector<int64_t> lines;
    auto c = call_of_.find(op);
    for (int64_t i = c == call_of_.end() ? -1 : c->second; i >= 0 && names.size() < 256;) {
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
    return cache_[op] = out;
  }

 private:
  const Trace& t_;
  const UserCode& uc_;
  std::unordered_map<int64_t, uint32_t> by_id_;
  std::unordered_map<uint32_t, int64_t> call_of_;
  std::unordered_map<uint32_t, std::pair<std::string, std::string>> cache_;
};

// Bytes by (op, site), largest first, at most `keep`.
std::vector<OpBytes> top_bytes(
    std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>>& by, const Trace& t,
    PythonSites& py, size_t keep) {
  // key: (op name id or -1, op index standing for the site); value: (bytes, count)
  std::vector<OpBytes> out;
  for (auto& [k, v] : by) {
    OpBytes o;
    o.op = k.first < 0 ? "(no op: allocated outside any recorded op)"
                       : std::string(t.names.get(static_cast<StrId>(k.first)));
    if (k.second >= 0) std::tie(o.site, o.stack) = py.of(static_cast<uint32_t>(k.second));
    o.bytes = v.first;
    o.count = v.second;
    out.push_back(std::move(o));
  }
  // Ops with the same name and site are one row.
  std::map<std::pair<std::string, std::string>, OpBytes> merged;
  for (OpBytes& o : out) {
    OpBytes& m = merged[{o.op, o.site}];
    if (m.count == 0)
      m = o;
    else {
      m.bytes += o.bytes;
      m.count += o.count;
    }
  }
  out.clear();
  for (auto& [k, o] : merged) out.push_back(std::move(o));
  std::sort(out.begin(), out.end(), [](const OpBytes& a, const OpBytes& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.op < b.op;
  });
  if (out.size() > keep) out.resize(keep);
  return out;
}

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

}  // namespace

ProfileReport analyze_profile(const ProfileTrace& t, const UserCode& user_code) {
  ProfileReport rep;
  rep.events = t.events;
  rep.device_names = t.device_names;
  rep.has_memory = !t.mems.empty();
  rep.has_stacks = !t.pycalls.empty();

  // Steps: the ProfilerStep#N annotations, else the whole trace.
  for (const auto& a : t.annotations)
    if (int64_t n = step_number(t.names.get(a.name)); n >= 0)
      rep.steps.push_back({n, a.ts, a.dur, {}, {}, {}});
  std::sort(rep.steps.begin(), rep.steps.end(),
            [](const ProfileStep& a, const ProfileStep& b) { return a.ts < b.ts; });
  double lo = 1e300, hi = -1e300;
  for (const auto& o : t.ops) lo = std::min(lo, o.ts), hi = std::max(hi, o.ts + o.dur);
  for (const auto& m : t.mems) lo = std::min(lo, m.ts), hi = std::max(hi, m.ts);
  if (lo > hi) lo = hi = 0;
  rep.t0 = rep.steps.empty() ? lo : std::min(lo, rep.steps.front().ts);
  if (rep.steps.empty()) rep.steps.push_back({-1, lo, hi - lo + 1e-3, {}, {}, {}});
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
    for (int64_t o : op_of)
      if (o >= 0) ops.push_back(static_cast<uint32_t>(o));
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    py.locate(ops);
  }
  // An (op name, op index) key: ops of one name and site merge later.
  auto key_of = [&](size_t m) -> std::pair<int64_t, int64_t> {
    int64_t o = op_of[m];
    return o < 0 ? std::pair<int64_t, int64_t>{-1, -1}
                 : std::pair<int64_t, int64_t>{t.ops[o].name, o};
  };

  // Memory, device by device, in time order.
  std::map<int, std::vector<uint32_t>> by_dev;
  for (uint32_t i = 0; i < t.mems.size(); ++i)
    if (t.mems[i].device >= 0) by_dev[t.mems[i].device].push_back(i);
  for (auto& [dev, idx] : by_dev) {
    std::stable_sort(idx.begin(), idx.end(),
                     [&](uint32_t a, uint32_t b) { return t.mems[a].ts < t.mems[b].ts; });
    struct Acc {
      StepDevice sd;
      int64_t capture = -1;  // position in idx after which the peak holds (-1: before the first)
      std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> most;
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
      if (m.total_allocated > a.sd.peak_allocated) {
        a.sd.peak_allocated = m.total_allocated;
        a.sd.peak_ts = m.ts;
        a.capture = static_cast<int64_t>(k);
      }
      a.sd.peak_reserved = std::max(a.sd.peak_reserved, m.total_reserved);
      if (m.bytes > 0) {
        ++a.sd.allocs;
        a.sd.alloc_bytes += m.bytes;
        auto& v = a.most[key_of(idx[k])];
        v.first += m.bytes;
        ++v.second;
      } else if (m.bytes < 0) {
        ++a.sd.frees;
        a.sd.free_bytes -= m.bytes;
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
    for (size_t j = 0; j < acc.size(); ++j) captures.emplace_back(acc[j].capture, j);
    std::sort(captures.begin(), captures.end());
    std::unordered_map<int64_t, std::pair<int64_t, size_t>> live;  // addr -> (bytes, mem index)
    size_t ci = 0;
    auto take = [&](size_t j) {
      std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> by;
      int64_t known = 0;
      for (auto& [addr, v] : live) {
        auto& e = by[key_of(v.second)];
        e.first += v.first;
        ++e.second;
        known += v.first;
      }
      StepDevice& sd = acc[j].sd;
      sd.live_at_peak = top_bytes(by, t, py, SIZE_MAX);
      if (sd.live_at_peak.size() > 8) {  // the rest as one row, so the rows add up to the peak
        OpBytes rest;
        rest.op = "(" + std::to_string(sd.live_at_peak.size() - 7) + " more ops)";
        for (size_t q = 7; q < sd.live_at_peak.size(); ++q) {
          rest.bytes += sd.live_at_peak[q].bytes;
          rest.count += sd.live_at_peak[q].count;
        }
        sd.live_at_peak.resize(7);
        sd.live_at_peak.push_back(rest);
      }
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
        live[m.addr] = {m.bytes, idx[k]};
      else if (m.bytes < 0)
        live.erase(m.addr);
      while (ci < captures.size() && captures[ci].first == static_cast<int64_t>(k))
        take(captures[ci++].second);
    }
    for (size_t j = 0; j < acc.size(); ++j) {
      acc[j].sd.device = dev;
      acc[j].sd.allocated_most = top_bytes(acc[j].most, t, py, 8);
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
