// The simulated allocator under other settings, per device (see whatif.h):
// the alternatives run on all cores, one per thread.
#include "analysis/whatif/whatif.h"

#include <algorithm>

#include "memsight/error.h"
#include "util/parallel.h"

namespace memsight::whatif {
namespace {

// Each applied over the recorded settings.
const char* const kStandard[] = {
    "expandable_segments:True",
    "max_split_size_mb:64",
    "max_split_size_mb:128",
    "max_split_size_mb:256",
    "max_split_size_mb:512",
    "garbage_collection_threshold:0.6",
    "garbage_collection_threshold:0.8",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:8",
};

// The device for these settings: a memory fraction caps the allocator at
// that share of the device's memory, as set_per_process_memory_fraction does.
simulate::Device device_for(const alloc::Settings& s, const simulate::Device& base) {
  simulate::Device d = base;
  if (s.memory_fraction > 0) {
    if (d.total <= 0)
      throw Error(
          "per_process_memory_fraction needs the device's memory: pass --device-memory SIZE "
          "(torch.cuda.mem_get_info()[1])");
    d.limit = static_cast<int64_t>(s.memory_fraction * static_cast<double>(d.total));
    d.limit_inferred = false;
    d.limit_high = -1;
  }
  return d;
}

Alternative make(const std::string& label, const alloc::Settings& recorded,
                 const simulate::Device& base, bool is_recorded) {
  Alternative a;
  a.label = label;
  a.settings = recorded;
  if (!is_recorded && label != "defaults") a.settings.apply(label);
  if (label == "defaults") a.settings = alloc::Settings{};
  a.recorded = is_recorded;
  a.device = device_for(a.settings, base);
  // Only where the label itself sets the threshold: a recorded one carried
  // into every alternative is not what makes their differences.
  const bool sets_gc = label.find("garbage_collection_threshold") != std::string::npos ||
                       (is_recorded && recorded.gc_threshold > 0);
  if (sets_gc && a.settings.gc_threshold > 0 && a.device.limit < 0)
    a.note =
        "no effect: torch collects cached blocks by this threshold only under "
        "set_per_process_memory_fraction";
  return a;
}

// The device as recorded, with --device-memory (memory held outside the
// allocator, the CUDA context and other processes, stays what the
// recording shows, when it shows it) and the recorded job's memory fraction.
simulate::Device recorded_memory(const simulate::Plan& p, int64_t device_memory, double fraction) {
  simulate::Device d = p.device_recorded;
  if (device_memory > 0) {
    int64_t outside = 0;
    if (!p.recorded_ooms.empty() && d.capacity >= 0)
      outside = std::max<int64_t>(0, (d.total > 0 ? d.total : device_memory) - d.capacity);
    d.total = device_memory;
    d.capacity = device_memory - outside;
  }
  if (fraction > 0) {
    alloc::Settings s;
    s.memory_fraction = fraction;
    d = device_for(s, d);
  }
  return d;
}

SelfCheck self_check(const simulate::Plan& p, const simulate::Result& r) {
  SelfCheck c;
  c.incomplete = p.incomplete;
  c.events = p.recorded.size();
  size_t n = std::min(p.recorded.size(), r.events.size());
  while (c.matching < n && p.recorded[c.matching] == r.events[c.matching]) ++c.matching;
  c.differs = c.matching < std::max(p.recorded.size(), r.events.size());
  if (c.differs) {
    c.recorded_missing = c.matching >= p.recorded.size();
    c.simulated_missing = c.matching >= r.events.size();
    if (!c.recorded_missing) c.recorded = p.recorded[c.matching];
    if (!c.simulated_missing) c.simulated = r.events[c.matching];
  }
  c.peak_recorded = p.recorded_peak_reserved;
  c.peak_simulated = r.peak.reserved;
  c.allocations = p.trace.allocs;
  c.misplaced = r.misplaced;
  c.ooms_recorded = p.recorded_ooms;
  for (const simulate::Oom& o : r.ooms) c.ooms_simulated.push_back(o.event);
  return c;
}

// Runs every alternative, several at once; with `check`, the recorded
// settings once more on the device as recorded (the self-check's run, last).
std::vector<Outcome> simulate_all(const Snapshot& snap, const simulate::Plan& p,
                                  std::vector<Alternative> alts, unsigned threads,
                                  const Alternative* check) {
  // One job per alternative, and one more at the top of an inferred cap.
  std::vector<std::pair<size_t, bool>> jobs;
  if (check) alts.push_back(*check);
  for (size_t i = 0; i < alts.size(); ++i) {
    jobs.push_back({i, false});
    if (alts[i].device.limit_inferred && !(check && i + 1 == alts.size()))
      jobs.push_back({i, true});
  }
  std::vector<Outcome> out(alts.size());
  for (size_t i = 0; i < alts.size(); ++i) out[i].alt = alts[i];
  // The events are kept only for the run the self-check compares.
  const size_t checked = check ? alts.size() - 1 : 0;
  parallel_for(jobs.size(), threads ? threads : threads_allowed(), [&](size_t j) {
    auto [i, high] = jobs[j];
    simulate::Inputs in{alts[i].settings, alts[i].device, i == checked && !high};
    if (high) {
      in.device.limit = in.device.limit_high;
      out[i].at_cap_high = simulate::run(snap, p, in);
    } else {
      out[i].result = simulate::run(snap, p, in);
    }
  });
  return out;
}

// A history that saw none of its memory reserved: only allocations, while
// segments held memory when it began.
bool state_only(const Snapshot& snap, const simulate::Plan& p) {
  return !p.trace.start.segments.empty() &&
         alloc::allocations_only(snap.trace, p.trace.begin, p.trace.end);
}

DeviceReport report_device(const Snapshot& snap, size_t device, const Options& opts) {
  DeviceReport d;
  d.device = static_cast<int>(device);
  simulate::Plan p = simulate::plan(snap, device);
  d.entries = p.rows.size();
  alloc::Settings recorded = alloc::Settings::recorded(snap, &d.ignored_settings);
  if (!opts.base.empty()) recorded.apply(opts.base);
  d.recorded_conf = recorded.conf();
  d.memory = recorded_memory(p, opts.device_memory, opts.memory_fraction);
  d.recorded_ooms = p.recorded_ooms;
  for (int32_t e : p.recorded_ooms)
    d.recorded_oom_sizes.push_back(snap.trace.size[p.trace.begin + e]);
  if (state_only(snap, p)) {
    d.state_only = true;
    d.start_reserved = p.start_reserved;
    d.start_segments = p.trace.start.segments.size();
    d.check.incomplete = "the history holds only allocations into memory reserved before it";
    return d;
  }
  d.truncation = truncation(snap, p);

  std::vector<Alternative> alts;
  alts.push_back(make("recorded", recorded, d.memory, true));
  if (!opts.set.empty()) {
    alts.push_back(make(opts.set, recorded, d.memory, false));
  } else {
    if (!(recorded == alloc::Settings{}))
      alts.push_back(make("defaults", recorded, d.memory, false));
    for (const char* s : kStandard) {
      std::string label = s;
      if (recorded.expandable_segments && label == "expandable_segments:True")
        label = "expandable_segments:False";
      Alternative a = make(label, recorded, d.memory, false);
      if (!(a.settings == recorded)) alts.push_back(std::move(a));
    }
  }
  // The self-check reproduces the recording: the recorded settings on the
  // device as recorded, whatever device the alternatives are asked on. A
  // recording that does not say what its device was (torch's own) is checked
  // on the device asked for when that device could have held it (the options
  // then describe the recorded device, as --memory-fraction does for a
  // capped job), and without a limit when it could not.
  simulate::Device as_recorded = p.device_recorded;
  if (as_recorded == simulate::Device{} && d.memory.capacity >= p.recorded_peak_reserved &&
      (d.memory.limit < 0 || d.memory.limit >= p.recorded_peak_reserved))
    as_recorded = d.memory;
  d.check_on_recorded_device = !(d.memory == as_recorded);
  const Alternative on_record = make("recorded", recorded, as_recorded, true);
  std::vector<Outcome> outcomes = simulate_all(snap, p, std::move(alts), opts.threads,
                                               d.check_on_recorded_device ? &on_record : nullptr);
  if (d.check_on_recorded_device) {
    d.check = self_check(p, outcomes.back().result);
    outcomes.pop_back();
  } else {
    d.check = self_check(p, outcomes.front().result);
  }
  if (estimated_history(snap, p)) {
    SelfCheck c;
    c.estimated = true;
    c.incomplete = "estimated history: nothing recorded to check against";
    c.peak_simulated = d.check.peak_simulated;
    c.allocations = d.check.allocations;
    d.check = c;
  }
  for (Outcome& o : outcomes) o.result.events.clear();
  if (!opts.set.empty()) {
    d.outcomes = std::move(outcomes);
    return d;
  }
  std::stable_sort(outcomes.begin(), outcomes.end(), [](const Outcome& x, const Outcome& y) {
    // Runs that died early reserved less: they go after those that finished.
    bool xs = x.result.stopped_at >= 0, ys = y.result.stopped_at >= 0;
    if (xs != ys) return ys;
    return x.result.peak.reserved < y.result.peak.reserved;
  });
  d.outcomes = std::move(outcomes);
  return d;
}

}  // namespace

simulate::Device device_for(const simulate::Plan& p, const Options& opts,
                            const alloc::Settings& s) {
  return device_for(s, recorded_memory(p, opts.device_memory, opts.memory_fraction));
}

bool estimated_history(const Snapshot& snap, const simulate::Plan& p) {
  return p.trace.allocs > 0 && p.recorded.empty() && p.trace.start.segments.empty() &&
         snap.segments.empty();
}

bool avoids(const Outcome& o, int32_t entry, bool high) {
  const simulate::Result& r = high && o.at_cap_high ? *o.at_cap_high : o.result;
  return (r.stopped_at < 0 || r.stopped_at > entry) &&
         std::find(r.avoided.begin(), r.avoided.end(), entry) != r.avoided.end();
}

const Outcome* best_for_oom(const DeviceReport& d, int32_t entry, bool at_cap_high_only) {
  const Outcome* best = nullptr;
  for (const Outcome& o : d.outcomes) {
    bool fits = at_cap_high_only ? !avoids(o, entry) && avoids(o, entry, true) : avoids(o, entry);
    if (!o.alt.recorded && fits && (!best || o.result.peak.reserved < best->result.peak.reserved))
      best = &o;
  }
  return best;
}

int64_t baseline(const DeviceReport& d) {
  for (const Outcome& o : d.outcomes)
    if (o.alt.recorded) return o.result.peak.reserved;
  return d.check.peak_simulated;
}

SimulatedFix simulated_fix(const DeviceReport& d, int32_t entry) {
  SimulatedFix f;
  const Outcome* best = best_for_oom(d, entry);
  const Outcome* maybe = best ? nullptr : best_for_oom(d, entry, true);
  if (best) {
    f.verdict = SimulatedFix::Verdict::Fits;
    f.settings = best->alt.label;
    f.peak_reserved = best->result.peak.reserved;
  } else if (maybe) {
    f.verdict = SimulatedFix::Verdict::FitsNearCapHigh;
    f.settings = maybe->alt.label;
    f.peak_reserved = maybe->result.peak.reserved;
  }
  f.recorded_peak = baseline(d);
  f.cap_inferred = d.memory.limit_inferred;
  f.cap_low = d.memory.limit;
  f.cap_high = d.memory.limit_high + 1;
  f.reproduces = d.check.ok() || !d.check.incomplete.empty();
  const Truncation& t = d.truncation;
  if (t.ends_at_oom == entry) {
    f.recording_ends = true;
    f.growth = t.growth;
    f.growth_window = t.window;
    f.growth_steady = t.steady;
    f.by_steps = t.by_steps;
    if (best) f.postponed_by = postponed_by(d, *best);
  }
  return f;
}

std::vector<SimulatedFix> simulated_fixes(const Snapshot& snap, size_t device,
                                          const std::vector<int32_t>& entries) {
  DeviceReport d;
  try {
    d = report_device(snap, device, {});
  } catch (const Error&) {
    return {};  // nothing to cite; the diagnosis stands as it is
  }
  if (d.state_only) return {};
  std::vector<SimulatedFix> out;
  for (int32_t e : entries) out.push_back(simulated_fix(d, e));
  return out;
}

Report run(const Snapshot& snap, const Options& opts) {
  if (!opts.set.empty()) {
    alloc::Settings probe;
    probe.apply(opts.set);  // a bad setting fails before any simulation
  }
  Report r;
  r.table = opts.set.empty();
  AlikeDevices alike;
  for (size_t d = 0; d < snap.device_count(); ++d) {
    if (snap.device_rows(d).first == snap.device_rows(d).second) continue;
    DeviceReport rep = report_device(snap, d, opts);
    uint64_t h = hash_mix(rep.entries, rep.outcomes.size());
    h = hash_mix(h, static_cast<uint64_t>(rep.check.peak_simulated));
    if (!alike.add(h, rep.device, [&](size_t g) { return alike_reports(r.devices[g], rep); }))
      r.devices.push_back(std::move(rep));
  }
  r.members = std::move(alike.members());
  return r;
}

}  // namespace memsight::whatif
