#pragma once
// Would another allocator setting have saved the job? The recorded requests
// of each device run through the simulated allocator (simulate.h) under
// other settings: peak reserved memory, what of it sat unused at the peak,
// and whether the recorded OOM still happens or a new one would. First the
// self-check: under the recorded settings the simulation must make the
// recorded segment events, place every block where torch placed it and
// reach torch's reserved peak; where it does not, the report says so and by
// how much before anything else.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "allocator/simulate.h"
#include "analysis/alike/alike.h"
#include "memsight/snapshot.h"
#include "memsight/summary.h"

namespace memsight::whatif {

struct Alternative {
  std::string label;  // the settings as asked ("expandable_segments:True"), "recorded", "defaults"
  alloc::Settings settings;
  simulate::Device device;
  bool recorded = false;
  std::string note;  // why a setting cannot act here, if it cannot
  bool operator==(const Alternative&) const = default;
};

struct Outcome {
  Alternative alt;
  simulate::Result result;
  // With a cap inferred from a recorded OOM (alt.device.limit_inferred),
  // `result` has the cap at the lowest value the recording allows, and this
  // one at the highest.
  std::optional<simulate::Result> at_cap_high;
  bool operator==(const Outcome&) const = default;
};

struct SelfCheck {
  std::string incomplete;  // why there is no complete history to check ("" when there is)
  // An estimated history (requests only, memsight estimate's input): no
  // segment was recorded, so there is nothing to check against.
  bool estimated = false;
  size_t events = 0;    // recorded segment events
  size_t matching = 0;  // leading events the simulation made alike
  // The first that differ (index `matching`), if any.
  bool differs = false;
  simulate::SegmentEvent recorded, simulated;
  bool recorded_missing = false, simulated_missing = false;
  int64_t peak_recorded = 0, peak_simulated = 0;
  int64_t allocations = 0, misplaced = 0;
  std::vector<int32_t> ooms_recorded, ooms_simulated;
  bool ok() const {
    return incomplete.empty() && !differs && peak_recorded == peak_simulated && misplaced == 0 &&
           ooms_recorded == ooms_simulated;
  }
  bool operator==(const SelfCheck&) const = default;
};

// Where the history stops short of the job: it ends at a recorded OOM (the
// job recorded nothing after it), and how allocated memory grew toward it.
struct Truncation {
  int32_t ends_at_oom = -1;  // the OOM's trace entry when only frees follow it
  // Allocated memory's growth over the last `window` entries (or whole
  // steps, `by_steps`) before that OOM; steady when every quarter of the
  // window (every step) grew.
  int64_t growth = 0, window = 0;
  bool by_steps = false, steady = false;
  bool operator==(const Truncation&) const = default;
};

struct DeviceReport {
  int device = 0;
  size_t entries = 0;
  std::string recorded_conf;  // the recorded settings as a configuration string
  // Recorded settings torch could not have run with, left at its defaults (why, one each).
  std::vector<std::string> ignored_settings;
  // The history made no segment while memory was reserved before it began
  // (a state-only snapshot): nothing to simulate; start_* say what was there.
  bool state_only = false;
  int64_t start_reserved = 0;
  size_t start_segments = 0;
  simulate::Device memory;  // the device as asked (--device-memory, --memory-fraction applied)
  // The self-check ran on the device as recorded, which `memory` is not.
  bool check_on_recorded_device = false;
  Truncation truncation;
  SelfCheck check;
  std::vector<int32_t> recorded_ooms;
  std::vector<int64_t> recorded_oom_sizes;
  std::vector<Outcome> outcomes;  // the alternatives, by peak reserved (the table)
  bool operator==(const DeviceReport&) const = default;
};

struct Options {
  // Settings to simulate, PYTORCH_CUDA_ALLOC_CONF style, applied over the
  // recorded ones; empty: the standard alternatives.
  std::string set;
  int64_t device_memory = -1;  // the device's total memory; -1: as recorded
  // The fraction the recorded job passed to set_per_process_memory_fraction
  // (snapshots do not record it): the cap of every simulation; 0: unknown.
  double memory_fraction = 0;
  unsigned threads = 0;  // 0: every core (MEMSIGHT_THREADS caps it)
  // Settings applied over the recorded ones before anything else: they
  // stand in for the recorded settings (an estimate's, `memsight estimate
  // --set`), and the alternatives apply over them.
  std::string base;
};

struct Report {
  bool table = true;  // the standard alternatives (no --set)
  // Alike devices (analysis/alike.h) keep one report: members[i] are the
  // devices devices[i] stands for.
  std::vector<DeviceReport> devices;
  std::vector<DeviceRanges> members;
};

// Throws Error for settings that cannot be simulated.
Report run(const Snapshot& snap, const Options& opts);
// The device a simulation of the plan runs on: as recorded, with the
// options' device memory and memory fraction, and the settings' own fraction
// (per_process_memory_fraction) over both.
simulate::Device device_for(const simulate::Plan& p, const Options& opts, const alloc::Settings& s);
// The history holds requests only: no segment event nor segment, while it
// allocates (an estimate's requests, before `memsight estimate`).
bool estimated_history(const Snapshot& snap, const simulate::Plan& p);
// The reserved peak the alternatives compare with: the simulation under the
// recorded settings (torch's own when the self-check passes).
int64_t baseline(const DeviceReport& d);
// What the simulation says of the recorded OOM at `entry`.
SimulatedFix simulated_fix(const DeviceReport& d, int32_t entry);
// The standard alternatives on one device, and what they say of each
// recorded OOM at `entries` (for summary, whose diagnosis cites them); empty
// when the device cannot be simulated.
std::vector<SimulatedFix> simulated_fixes(const Snapshot& snap, size_t device,
                                          const std::vector<int32_t>& entries);

// The best simulated outcome for the recorded OOM at `entry` of a device:
// the alternative with the lowest reserved peak under which its request
// fits whatever the inferred cap (`at_cap_high_only`: only with the highest
// cap the recording allows), or null when none does.
const Outcome* best_for_oom(const DeviceReport& d, int32_t entry, bool at_cap_high_only = false);
// Whether the recorded OOM at `entry` is avoided (with an inferred cap:
// at its lowest value; `high`: at its highest).
bool avoids(const Outcome& o, int32_t entry, bool high = false);

// Where the history stops short (truncation.cpp).
Truncation truncation(const Snapshot& snap, const simulate::Plan& p);
// By about how many entries (steps, with Truncation::by_steps) an outcome
// that avoids the OOM the history ends at only postpones it, at the pace
// allocated memory grew before it; -1 where no steady growth or cap is known.
int64_t postponed_by(const DeviceReport& d, const Outcome& o);

// The two bounds of a range of sizes, in a unit small enough that they
// read apart ("1534.0MiB", "1554.0MiB", not "1.5GiB" twice).
std::pair<std::string, std::string> size_range(int64_t lo, int64_t hi);

std::string text(const Report& r);
std::string json(const Report& r);
// One device's report as JSON; with `alike`, the devices it stands for.
void device_json(JsonWriter& w, const DeviceReport& d, bool table,
                 const DeviceRanges* alike = nullptr);

}  // namespace memsight::whatif
