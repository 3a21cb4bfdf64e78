#pragma once
// What a person wants to know first about a snapshot: how high memory went
// and when, what was live at the peak and where it was allocated, how
// fragmented the cache is, and why each out-of-memory error happened.
// Peaks and current values are torch's own counters (allocated_bytes,
// active_bytes, reserved_bytes), replayed block by block.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memsight/categories.h"
#include "memsight/frames.h"
#include "memsight/holders.h"
#include "memsight/input_limits.h"
#include "memsight/snapshot.h"
#include "memsight/whatif.h"

namespace memsight {

struct SiteStat {
  // The site frame's label ("train.py:81:step"); special groups:
  // "<no stack recorded>", "<only allocator and interpreter frames>".
  std::string site;
  FrameKind kind = FrameKind::Internal;  // of the site frame (Internal: none)
  StackId stack = 0;                     // one allocation stack of the group
  int64_t bytes = 0;                     // block bytes, as allocated_bytes counts them
  int64_t count = 0;
  bool operator==(const SiteStat&) const = default;
};

// Why an out-of-memory error happened, in the order a person can act on
// them (summary/oom_diagnosis.cpp says when each holds).
enum class OomCause : uint8_t { Fragmentation, OtherProcesses, Limit, Demand };
// "fragmentation", "other processes", "limit", "demand": how reports name it.
std::string_view oom_cause_name(OomCause c);
std::vector<std::string> oom_cause_names(const std::vector<OomCause>& causes);

// What to change about an OOM, and which piece of the diagnosis says so.
enum class RemedyKind : uint8_t {
  ExpandableSegments,       // fragmentation: let segments grow in place
  FewerTemporaries,         // fragmentation: fewer odd-sized temporaries
  GpuAlone,                 // other processes: give the job the device
  RaiseCap,                 // a cap inside the process refused it
  SmallerBatch,             // true demand: less of it
  CheckpointSite,           // true demand: the site that holds most
  EmptyCacheBetweenPhases,  // true demand: release the cache only between phases
  MemoryKind,               // the kind of memory that holds most (kinds/)
  SimulatedSetting,         // an allocator setting the simulation shows fits (whatif/)
  NoSettingSaves,           // the simulation shows no setting alone fits (whatif/)
};
struct Remedy {
  RemedyKind kind;
  std::string text;
  bool operator==(const Remedy&) const = default;
};

// The remedies' texts, in order.
std::vector<std::string> remedy_texts(const std::vector<Remedy>& remedies);

struct OomReport {
  uint32_t event = 0;  // trace entry index within the device's trace
  int64_t time_us = 0;
  int64_t requested = 0;                  // bytes the failed request asked for (rounded)
  int64_t device_free = 0;                // free on the device per cudaMemGetInfo
  int64_t device_total = -1, limit = -1;  // when the snapshot says (memsight's OOM observer)
  int64_t allocated = 0;                  // allocated_bytes at that moment
  int64_t active = 0;                     // active_bytes
  int64_t reserved = 0;                   // reserved_bytes
  int64_t cached_free = 0;                // reserved but not active, outside graph pools
  int64_t graph_pool_free = 0;            // free inside CUDA graphs' private pools
  int64_t largest_free = 0;               // largest free block in any pool
  int64_t largest_free_pool = 0;          // largest free block in the request's pool
  std::string pool;                       // "small" (requests up to 1 MiB) or "large"
  int64_t releasable = 0;                 // cached bytes in segments with nothing live
  StackId stack = 0;                      // where the request came from, if recorded
  std::string site;                       // its site label
  OomCause verdict = OomCause::Demand;    // the main cause
  std::vector<OomCause> causes;           // every cause that holds, main first
  std::string explanation;                // plain-language diagnosis with the facts
  std::vector<Remedy> remedies;
  // Who held most of the blocks live at the OOM (and still live at the
  // dump, where memsight.torch named them); blocks == 0: not recorded.
  HeldAmount held_by;
  CategoryView categories;  // what kind of memory was allocated then
  // The allocator simulated on this history under other settings (memsight
  // whatif), when it ran, and the sentence that cites it ("" when not run).
  std::optional<SimulatedFix> fix;
  std::string simulated;
  bool operator==(const OomReport&) const = default;
};

struct DeviceSummary {
  int device = 0;
  size_t entries = 0;
  // Peaks over the trace (trace entry indices; -1: the state before the
  // first recorded entry). torch's allocated_bytes / active_bytes /
  // reserved_bytes peaks when the history is complete and began with the
  // counters reset.
  int64_t peak_allocated = 0, peak_allocated_event = -1, peak_allocated_time_us = 0;
  int64_t peak_active = 0, peak_active_event = -1, peak_active_time_us = 0;
  int64_t peak_reserved = 0, peak_reserved_event = -1, peak_reserved_time_us = 0;
  int64_t peak_requested = 0;  // requested_bytes
  std::vector<SiteStat>
      top_sites;            // live at the allocated peak, largest first (SummaryOptions::top_sites)
  int64_t sites_total = 0;  // number of sites before the cut
  // Allocated before the recording began, live at the allocated peak and
  // at the start of the trace.
  int64_t before_recording_bytes = 0, before_recording_count = 0;
  int64_t before_recording_start_bytes = 0, before_recording_start_count = 0;
  // At the snapshot, from its blocks (exact whatever the history).
  int64_t allocated_now = 0;  // block bytes of active_allocated blocks
  int64_t active_now = 0;     // ... and of active_pending_free ones
  int64_t requested_now = 0;  // requested bytes of active blocks
  int64_t reserved_now = 0;
  int64_t free_now = 0;  // bytes of inactive blocks
  int64_t largest_free_now = 0;
  int64_t free_blocks_now = 0;
  double fragmentation = 0;  // 1 - largest_free / free (0 when nothing is free)
  // CUDA graphs' private memory pools (segments whose segment_pool_id is not
  // (0, 0)): kept for the graphs' replays, so their free blocks are not in
  // free_now nor in fragmentation.
  int64_t graph_pools = 0, graph_pool_reserved = 0, graph_pool_allocated = 0, graph_pool_free = 0;
  int64_t segments_now = 0;
  // Frees of allocations the trace never saw: made before recording began or
  // dropped when the history buffer wrapped.
  // The live blocks at the dump by the holder memsight.torch named then
  // (memsight_holders), largest first; empty without it.
  std::vector<HeldAmount> held;
  int64_t orphan_frees = 0;
  std::string history_wrapped;  // "yes", "no" or "possibly"
  // Whether the peaks are torch's exact numbers; else they are lower bounds
  // of the peaks within the recorded window (see `exactness`).
  bool exact = true;
  std::string exactness;  // why not, in a sentence ("" when exact)
  std::vector<OomReport> ooms;
  // What kind of memory (memsight/categories.h), at the allocated peak and
  // at the snapshot, and how it could be told.
  CategoryView categories_peak, categories_now;
  CategorySources category_sources;
  bool operator==(const DeviceSummary&) const = default;
};

// A snapshot memsight estimated rather than recorded (its top-level
// memsight_estimate): what produced it, what completed it, and the memory
// terms it adds beyond the requests it traced.
struct EstimateNote {
  bool present = false;
  std::string produced_by, completed_by;
  std::vector<std::pair<std::string, int64_t>> terms;  // (name, bytes)
};

struct Summary {
  // One summary per group of alike devices (devices whose summaries are the
  // same but for the device number: every device with nothing on it, or
  // 100,000 devices of one allocation each), in the order of each group's
  // first device, which DeviceSummary::device names.
  std::vector<DeviceSummary> devices;
  // The devices of each group: ranges [first, last], ascending.
  std::vector<std::vector<std::pair<int, int>>> members;
  size_t total_entries = 0;
  std::vector<std::string> user_code;  // the --user-code patterns in force
  // How many devices the snapshot lists (its traces, and the devices of its
  // segments).
  size_t devices_listed = 0;
  // Numbers of the snapshot outside memsight's rule (snapshot_input_notes).
  InputNotes input_notes;
  EstimateNote estimate;  // summary_estimate.cpp
};

struct SummaryOptions {
  UserCode user_code;
  // false: one group per device (the JSON reads the same either way).
  bool group_alike = true;
  // Live sites kept per device (DeviceSummary::top_sites); `memsight ranks`
  // keeps more to compare ranks by site.
  size_t top_sites = 10;
};

Summary summarize(const Snapshot& snap, const SummaryOptions& opts = {});
// What the snapshot holds outside memsight's rule for numbers
// (memsight/input_limits.h): sizes outside 0..2^53, times that go back.
InputNotes snapshot_input_notes(const Snapshot& snap);
// frames_all: every frame of each site and OOM stack, tagged by kind.
// Groups of alike devices are printed once, named by their devices.
std::string summary_text(const Snapshot& snap, const Summary& s, bool frames_all = false);
// How summary_json lists devices: Every device the snapshot lists, each in
// its place (the same bytes however the devices were grouped); the Page's
// form, each group with something on it once, its devices in "alike" when
// several; or every group once, "alike" always (Groups, for Python, which
// shares one group's values among its devices).
enum class DeviceListing { Every, Page, Groups };
std::string summary_json(const Snapshot& snap, const Summary& s,
                         DeviceListing listing = DeviceListing::Every);
}  // namespace memsight
