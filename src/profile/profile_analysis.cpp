// analyze_profile: per profiler step and device, the allocator's peaks from
// the [memory] events, what was live at the peak and what allocated most
// (by the op that asked, and where Python called it: op_groups.h), and the
// ops and kernels that took the time.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <unordered_map>

#include "memsight/profile.h"
#include "profile/op_groups.h"
#include "profile/python_sites.h"

namespace memsight {
namespace {

using profile::Groups;
using profile::LiveByGroup;
using profile::PythonSites;
using Trace = ProfileTrace;

// "ProfilerStep#12" -> 12, else -1.
int64_t step_number(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!name.starts_with(kPrefix)) return -1;
  int64_t n = -1;
  auto [p, ec] = std::from_chars(name.data() + kPrefix.size(), name.data() + name.size(), n);
  return ec == std::errc() && p == name.data() + name.size() ? n : -1;
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

constexpr InputReason kBadStep{"ProfilerStep annotation", "ProfilerStep annotations",
                               "ignored: no step number in 0..2^63-1 after the '#'"};
// Steps x devices rows beyond this list only the devices with memory events
// during the step (a device's totals carry over unchanged through the rest).
constexpr size_t kMaxStepDevices = 4'000'000;
constexpr InputReason kQuietDevices{
    "step row of a device", "step rows of devices",
    "left out: the device had no memory event during the step, and the trace has more than "
    "4,000,000 steps times devices"};

// Steps: the ProfilerStep#N annotations, else the whole trace. A number
// seen more than once gives one step per span, labelled by occurrence.
void find_steps(const Trace& t, ProfileReport& rep) {
  for (const auto& a : t.annotations) {
    std::string_view name = t.names.get(a.name);
    if (int64_t n = step_number(name); n >= 0)
      rep.steps.push_back({n, 1, 1, a.ts, a.dur, {}, {}, {}});
    else if (name.starts_with("ProfilerStep#"))
      rep.notes.add(kBadStep);
  }
  std::stable_sort(rep.steps.begin(), rep.steps.end(),
                   [](const ProfileStep& a, const ProfileStep& b) { return a.ts < b.ts; });
  std::unordered_map<int64_t, int64_t> seen;
  for (ProfileStep& s : rep.steps) s.occurrence = ++seen[s.step];
  for (ProfileStep& s : rep.steps) s.occurrences = seen[s.step];
  double lo = 1e300, hi = -1e300;
  for (const auto& o : t.ops) lo = std::min(lo, o.ts), hi = std::max(hi, o.ts + o.dur);
  for (const auto& m : t.mems) lo = std::min(lo, m.ts), hi = std::max(hi, m.ts);
  if (lo > hi) lo = hi = 0;
  rep.t0 = rep.steps.empty() ? lo : std::min(lo, rep.steps.front().ts);
  if (rep.steps.empty()) rep.steps.push_back({-1, 1, 1, lo, hi - lo + 1e-3, {}, {}, {}});
}

// The step holding time ts (-1: none); steps are in time order.
int64_t step_of(const std::vector<ProfileStep>& steps, double ts) {
  auto it = std::upper_bound(steps.begin(), steps.end(), ts,
                             [](double v, const ProfileStep& s) { return v < s.ts; });
  if (it == steps.begin()) return -1;
  --it;
  return ts < it->ts + it->dur ? it - steps.begin() : -1;
}

// The op of each memory event: the innermost cpu_op around it on its thread.
std::vector<int64_t> ops_of_memory(const Trace& t) {
  std::vector<int64_t> q_tid;
  std::vector<double> q_ts;
  for (const auto& m : t.mems) {
    q_tid.push_back(m.tid);
    q_ts.push_back(m.ts);
  }
  return profile::innermost(t.ops, q_tid, q_ts);
}

// The ops that allocated, once each, ascending.
std::vector<uint32_t> allocating_ops(const Trace& t, const std::vector<int64_t>& op_of) {
  std::vector<uint32_t> ops;
  for (size_t m = 0; m < op_of.size(); ++m)
    if (op_of[m] >= 0 && t.mems[m].bytes > 0) ops.push_back(static_cast<uint32_t>(op_of[m]));
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  return ops;
}

// One step on one device, while its memory events are read.
struct StepAcc {
  StepDevice sd;
  int64_t capture = -1;  // position in idx after which the peak holds (-1: before the first)
  int64_t events = 0;    // memory events of the device during the step
  std::unordered_map<uint32_t, std::pair<int64_t, int64_t>> most;  // group -> (bytes, count)
};

// Each step's peaks, allocations and frees on one device (idx: its memory
// events in time order), and where in idx its peak holds.
std::vector<StepAcc> accumulate_steps(const Trace& t, const std::vector<uint32_t>& idx,
                                      const std::vector<ProfileStep>& steps, const Groups& groups) {
  std::vector<StepAcc> acc(steps.size());
  int64_t cur_a = 0, cur_r = 0;  // allocator totals after the last event seen
  size_t started = 0;            // steps begun before the current event (steps are in time order)
  for (size_t k = 0; k < idx.size(); ++k) {
    const auto& m = t.mems[idx[k]];
    int64_t s = step_of(steps, m.ts);
    // Steps begun before this event start from the totals so far.
    for (; started < steps.size() && steps[started].ts <= m.ts; ++started) {
      StepAcc& a = acc[started];
      a.sd.peak_allocated = cur_a;
      a.sd.peak_reserved = cur_r;
      a.sd.peak_ts = steps[started].ts;
      a.capture = static_cast<int64_t>(k) - 1;
    }
    cur_a = m.total_allocated;
    cur_r = m.total_reserved;
    if (s < 0) continue;
    StepAcc& a = acc[static_cast<size_t>(s)];
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
  for (; started < steps.size(); ++started) {  // no event after it began
    acc[started].sd.peak_allocated = cur_a;
    acc[started].sd.peak_reserved = cur_r;
    acc[started].capture = static_cast<int64_t>(idx.size()) - 1;
  }
  return acc;
}

// What was live at each step's peak: one replay of the device's events,
// stopping by at each capture point (list_quiet: also for steps without
// events).
void live_at_peaks(const Trace& t, const std::vector<uint32_t>& idx, std::vector<StepAcc>& acc,
                   bool list_quiet, const Groups& groups) {
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
}

// The curve of one device: at most ~4000 points, each bucket's highest.
ProfileReport::Curve memory_curve(const Trace& t, int dev, const std::vector<uint32_t>& idx) {
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
  return c;
}

// Memory, device by device, in time order.
void analyze_memory(const Trace& t, const Groups& groups, ProfileReport& rep) {
  std::map<int, std::vector<uint32_t>> by_dev;
  for (uint32_t i = 0; i < t.mems.size(); ++i)
    if (t.mems[i].device >= 0) by_dev[t.mems[i].device].push_back(i);
  const bool list_quiet = rep.steps.size() * by_dev.size() <= kMaxStepDevices;
  for (auto& [dev, idx] : by_dev) {
    std::stable_sort(idx.begin(), idx.end(),
                     [&](uint32_t a, uint32_t b) { return t.mems[a].ts < t.mems[b].ts; });
    std::vector<StepAcc> acc = accumulate_steps(t, idx, rep.steps, groups);
    live_at_peaks(t, idx, acc, list_quiet, groups);
    for (size_t j = 0; j < acc.size(); ++j) {
      if (!list_quiet && !acc[j].events) {
        rep.notes.add(kQuietDevices);
        continue;
      }
      acc[j].sd.device = dev;
      acc[j].sd.allocated_most = profile::top_bytes(acc[j].most, groups, 8);
      rep.steps[j].devices.push_back(std::move(acc[j].sd));
    }
    rep.curves.push_back(memory_curve(t, dev, idx));
  }
}

// Time: ops by CPU time (inclusive) and kernels by GPU time, per step.
void analyze_time(const Trace& t, ProfileReport& rep) {
  std::vector<std::unordered_map<StrId, NameTime>> ops(rep.steps.size()), kern(rep.steps.size());
  for (const auto& o : t.ops)
    if (int64_t s = step_of(rep.steps, o.ts); s >= 0) {
      NameTime& nt = ops[static_cast<size_t>(s)][o.name];
      nt.total_us += o.dur;
      ++nt.count;
    }
  std::unordered_map<int64_t, double> launch(t.launches.begin(), t.launches.end());
  for (const auto& k : t.kernels) {
    auto it = launch.find(k.correlation);
    if (int64_t s = step_of(rep.steps, it == launch.end() ? k.ts : it->second); s >= 0) {
      NameTime& nt = kern[static_cast<size_t>(s)][k.name];
      nt.total_us += k.dur;
      ++nt.count;
    }
  }
  for (size_t j = 0; j < rep.steps.size(); ++j) {
    rep.steps[j].top_ops = top_times(ops[j], t, 10);
    rep.steps[j].top_kernels = top_times(kern[j], t, 10);
  }
}

}  // namespace

ProfileReport analyze_profile(const ProfileTrace& t, const UserCode& user_code) {
  ProfileReport rep;
  rep.events = t.events;
  rep.device_names = t.device_names;
  rep.has_memory = !t.mems.empty();
  rep.has_stacks = !t.pycalls.empty();
  rep.notes = t.notes;
  find_steps(t, rep);
  const std::vector<int64_t> op_of = ops_of_memory(t);
  PythonSites py(t, user_code);
  py.locate(allocating_ops(t, op_of));
  const Groups groups(t, py, op_of);
  analyze_memory(t, groups, rep);
  analyze_time(t, rep);
  return rep;
}

}  // namespace memsight
