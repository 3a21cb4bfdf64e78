// summarize(): one replay of the allocator per device, then plain analyses
// over it: peaks, live sites at the peak, memory from before the recording,
// fragmentation at the snapshot and the diagnosis of each OOM.
#include "memsight/summary.h"

#include <algorithm>
#include <functional>

#include "allocator/replay.h"
#include "analysis/alike/alike.h"
#include "analysis/kinds/classify.h"
#include "analysis/moments/graph_pool_free.h"
#include "analysis/summary/oom_diagnosis.h"
#include "analysis/summary/sites.h"
#include "analysis/summary/summary_estimate.h"
#include "analysis/summary/summary_hash.h"
#include "analysis/summary/summary_json.h"
#include "analysis/summary/summary_times.h"
#include "analysis/whatif/whatif.h"
#include "model/device_dicts.h"
#include "model/segment_index.h"
#include "util/parallel.h"
#include "util/text_format.h"

namespace memsight {
namespace {

bool active(const Block& b) {
  return b.state == BlockState::ActiveAllocated || b.state == BlockState::ActivePendingFree;
}

// allocator_settings.trace_alloc_overflowed, where newer torch records it.
std::pair<bool, bool> overflow_flag(const Snapshot& snap) {
  const PyValue* st = snap.top("allocator_settings");
  const PyValue* o = st ? st->get("trace_alloc_overflowed") : nullptr;
  if (!o) return {false, false};
  if (o->kind == PyValue::Kind::List)
    return {true, std::any_of(o->items.begin(), o->items.end(), [](const PyValue& v) {
              return v.kind == PyValue::Kind::Bool && v.b;
            })};
  return {true, o->kind == PyValue::Kind::Bool && o->b};
}

// A CUDA graph's private pool: memory only that graph's (or graph tree's)
// allocations use, held for its replays. Its free blocks are not the cache
// any other request can use, so they are not fragmentation.
void add_graph_pool(const Snapshot& snap, const Segment& s,
                    std::vector<std::pair<int64_t, int64_t>>& seen, DeviceSummary& ds) {
  const std::pair<int64_t, int64_t> id{s.pool_id[0], s.pool_id[1]};
  if (std::find(seen.begin(), seen.end(), id) == seen.end()) seen.push_back(id);
  ds.graph_pools = static_cast<int64_t>(seen.size());
  ds.graph_pool_reserved += s.total_size;
  for (const Block& b : snap.segment_blocks(s))
    (active(b) ? ds.graph_pool_allocated : ds.graph_pool_free) += b.size;
}

// The device's own segments (model/segment_index.h): a scan of every
// segment per device grew with devices x segments.
void state_at_snapshot(const Snapshot& snap, DeviceSummary& ds) {
  std::vector<std::pair<int64_t, int64_t>> pools;
  for (uint32_t i : snap.segments_by_device().of(ds.device)) {
    const Segment& s = snap.segments[i];
    ds.reserved_now += s.total_size;
    ++ds.segments_now;
    const bool graph_pool = s.pool_id[0] != 0 || s.pool_id[1] != 0;
    if (graph_pool) add_graph_pool(snap, s, pools, ds);
    for (const Block& b : snap.segment_blocks(s)) {
      if (active(b)) {
        ds.active_now += b.size;
        ds.requested_now += b.requested_size;
        if (b.state == BlockState::ActiveAllocated) ds.allocated_now += b.size;
      } else if (!graph_pool) {
        ds.free_now += b.size;
        ++ds.free_blocks_now;
        ds.largest_free_now = std::max(ds.largest_free_now, b.size);
      }
    }
  }
  if (ds.free_now > 0)
    ds.fragmentation =
        1.0 - static_cast<double>(ds.largest_free_now) / static_cast<double>(ds.free_now);
}

// Why the peaks may not be torch's numbers, in one sentence.
void judge_exactness(const replay::Result& rr, DeviceSummary& ds) {
  std::string why;
  if (ds.history_wrapped == "yes" || ds.history_wrapped == "possibly")
    why = ds.history_wrapped == "yes"
              ? "the history buffer wrapped, so the peaks are those of the recorded window"
              : "the trace frees " + count_of(ds.orphan_frees, "allocation") +
                    " it never saw (recording began late or the buffer wrapped): "
                    "the peaks are those of the recorded window, and sizes of those blocks "
                    "are estimated";
  else if (rr.unplaced_allocs || rr.size_mismatches)
    why = count_of(rr.unplaced_allocs + rr.size_mismatches, "block size") +
          " could not be replayed exactly; those are estimated from the request";
  ds.exact = why.empty();
  ds.exactness = why;
}

// The devices' memory as memsight's OOM observer records it beside the
// snapshot (top-level "memsight_device_memory": [{device, total, limit}]),
// the device's own entries (the last wins).
void device_memory(const Snapshot& snap, int device, int64_t& total, int64_t& limit) {
  for (const PyValue* d : snap.device_memory().of(device)) {
    if (const PyValue* t = d->get("total"); t && t->kind == PyValue::Kind::Int) total = t->i;
    if (const PyValue* l = d->get("limit"); l && l->kind == PyValue::Kind::Int) limit = l->i;
  }
}

// What a device's summary is read from: the snapshot, and what every device
// shares.
struct DeviceInputs {
  const Snapshot& snap;
  const FrameClassifier& fc;
  const alloc::Settings& cfg;
  std::pair<bool, bool> overflow;  // overflow_flag(): known, overflowed
  const std::vector<StorageTag>& tags;
  const Holders& holders;  // memsight_holders (empty without it)
  size_t top_sites;
};

// Peaks (and when), history, exactness, the live sites at the allocated peak
// and memory from before the recording, from the device's replay.
void peaks_and_sites(const DeviceInputs& in, const replay::Result& rr, uint32_t begin,
                     DeviceSummary& ds) {
  auto time_of = [&](int64_t ev) { return ev < 0 ? 0 : in.snap.trace.time_us[begin + ev]; };
  ds.peak_allocated = rr.peak.allocated;
  ds.peak_allocated_event = rr.peak_allocated_event;
  ds.peak_allocated_time_us = time_of(rr.peak_allocated_event);
  ds.peak_active = rr.peak.active;
  ds.peak_active_event = rr.peak_active_event;
  ds.peak_active_time_us = time_of(rr.peak_active_event);
  ds.peak_reserved = rr.peak.reserved;
  ds.peak_reserved_event = alloc::reserved_peak_entry(
      in.snap.trace, begin, begin + static_cast<uint32_t>(ds.entries), rr.peak_reserved_event);
  ds.peak_reserved_time_us = time_of(ds.peak_reserved_event);
  ds.peak_requested = rr.peak.requested;
  ds.orphan_frees = rr.estimated_blocks;
  auto [flag_known, flag_overflow] = in.overflow;
  ds.history_wrapped =
      flag_known ? (flag_overflow ? "yes" : "no") : (ds.orphan_frees ? "possibly" : "no");
  judge_exactness(rr, ds);
  if (!ds.entries && rr.blocks.size()) {  // state-only: blocks, no history
    ds.exact = false;
    ds.exactness =
        "the snapshot has no allocation history (a state-only recording): the peaks are the "
        "state at its end";
  }
  SiteGroups g = group_sites(in.fc, rr, ds.peak_allocated_event, in.top_sites, !ds.entries);
  ds.sites_total = static_cast<int64_t>(g.total);
  ds.top_sites = std::move(g.sites);
  ds.before_recording_bytes = g.before_bytes;
  ds.before_recording_count = g.before_count;
  for (size_t i = 0, n = replay::allocated_by(rr, replay::Lifetime::kBefore); i < n; ++i) {
    if (!ds.entries && rr.blocks[i].stack) continue;  // allocated while recording (sites.h)
    ds.before_recording_start_bytes += rr.blocks[i].size;
    ++ds.before_recording_start_count;
  }
}

// The holder keeping the most of the blocks live at `event` that were still
// live at the dump (memsight.torch named the holders then); blocks == 0 if none.
HeldAmount held_most_at(const Holders& holders, const replay::Result& rr, int64_t event,
                        int device) {
  std::vector<HeldAmount> by(holders.holders.size());
  for (size_t i = 0, n = replay::allocated_by(rr, event); i < n; ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    if (l.free_requested != replay::Lifetime::kNever) continue;  // not the block named at the dump
    if (const HeldStorage* h = holders.in_block(device, l.address, l.size)) {
      ++by[h->holder].blocks;
      by[h->holder].bytes += l.size;
    }
  }
  HeldAmount best;
  for (size_t i = 0; i < by.size(); ++i)
    if (by[i].bytes > best.bytes) best = {holders.holders[i], by[i].blocks, by[i].bytes};
  return best;
}

// Free memory at the OOM outside CUDA graphs' private pools: only their
// graphs can use theirs, so it neither fits the request nor fragments.
void outside_graph_pools(OomReport& o, const Snapshot& snap, int device, const replay::Result& rr,
                         const replay::OomState& st, bool small) {
  const GraphPoolFree gp = graph_pool_free(snap, static_cast<size_t>(device), rr, st.event);
  if (!gp.pools) return;
  o.graph_pool_free = gp.bytes;
  o.cached_free = std::max<int64_t>(0, o.cached_free - gp.bytes);
  o.largest_free =
      std::min(o.cached_free, std::max(gp.outside_largest_small, gp.outside_largest_large));
  o.largest_free_pool =
      std::min(o.largest_free, small ? gp.outside_largest_small : gp.outside_largest_large);
}

// One report per OOM of the device's replay: the allocator's state then, its
// causes and remedies.
std::vector<OomReport> oom_reports(const DeviceInputs& in, const replay::Result& rr,
                                   const BlockCategories& bc, uint32_t begin, int device) {
  const TraceTable& t = in.snap.trace;
  int64_t total = -1, limit = -1;
  device_memory(in.snap, device, total, limit);
  std::vector<OomReport> out;
  const Holders& holders = in.holders;
  for (const replay::OomState& st : rr.ooms) {
    uint32_t r = begin + static_cast<uint32_t>(st.event);
    OomReport o;
    o.event = static_cast<uint32_t>(st.event);
    o.time_us = t.time_us[r];
    o.requested = t.size[r];
    o.device_free = t.addr[r];
    o.device_total = total;
    o.limit = limit;
    o.allocated = st.at.allocated;
    o.active = st.at.active;
    o.reserved = st.at.reserved;
    o.cached_free = std::max<int64_t>(0, st.at.reserved - st.at.active);
    o.largest_free = std::max(st.free.largest_small, st.free.largest_large);
    bool small = alloc::small_request(alloc::round_size(in.cfg, o.requested));
    o.pool = small ? "small" : "large";
    o.largest_free_pool = small ? st.free.largest_small : st.free.largest_large;
    o.releasable = st.free.releasable;
    outside_graph_pools(o, in.snap, device, rr, st, small);
    if (!holders.empty()) o.held_by = held_most_at(holders, rr, st.event, device);
    o.stack = t.stack[r];
    o.site = o.stack ? in.fc.describe(o.stack, 3) : "";
    // The live site that holds most at the OOM: what to checkpoint or shrink.
    SiteGroups at = group_sites(in.fc, rr, st.event, 1);
    diagnose_oom(o, at.sites.empty() ? SiteStat{} : at.sites.front(), in.cfg.expandable_segments);
    // What kind of memory held it; when the verdict is demand, that is the
    // first thing to change.
    o.categories = view_at(bc, rr, st.event);
    std::vector<Remedy> more;
    for (std::string& text : category_remedies(o.categories))
      more.push_back({RemedyKind::MemoryKind, std::move(text)});
    if (o.verdict == OomCause::Demand)
      o.remedies.insert(o.remedies.begin(), more.begin(), more.end());
    else if (std::find(o.causes.begin(), o.causes.end(), OomCause::Demand) != o.causes.end())
      o.remedies.insert(o.remedies.end(), more.begin(), more.end());
    out.push_back(std::move(o));
  }
  return out;
}

// A trace this long gives a second thread enough to do.
constexpr uint32_t kThreadedEntries = 60000;

// `side`: work of the whole summary (the input notes), done beside this
// device's replay when the device is big enough for a second thread (and
// then cleared).
DeviceSummary summarize_device(const DeviceInputs& in, size_t d, std::function<void()>& side) {
  DeviceSummary ds;
  ds.device = static_cast<int>(d);
  uint32_t begin = 0, end = 0;
  if (d < in.snap.device_count()) std::tie(begin, end) = in.snap.device_rows(d);
  ds.entries = end - begin;
  const unsigned threads = ds.entries >= kThreadedEntries ? threads_allowed() : 1;
  // The replay is the longest step; what the snapshot and the trace alone
  // decide is found beside it.
  replay::Result rr;
  AllocPhases phases;
  parallel_for(2, threads, [&](size_t i) {
    if (i == 0) {
      rr = replay::run(in.snap, d, in.cfg);
      return;
    }
    state_at_snapshot(in.snap, ds);
    phases = find_phases(in.snap, d);
    if (threads > 1 && side) {
      side();
      side = nullptr;
    }
  });
  // Two independent readers of the replay, side by side (classify_blocks
  // does not touch the frame classifier, whose caches are not shared across
  // threads).
  BlockCategories bc;
  parallel_for(2, threads, [&](size_t i) {
    if (i == 0) {
      peaks_and_sites(in, rr, begin, ds);
      return;
    }
    bc = classify_blocks(in.snap, d, rr, in.tags, std::move(phases));
    ds.categories_peak = view_at(bc, rr, rr.peak_allocated_event);
    ds.categories_now = view_at(bc, rr, static_cast<int64_t>(ds.entries) - 1);
  });
  ds.category_sources = bc.sources;
  if (!in.holders.empty()) ds.held = held_amounts(in.snap, in.holders, ds.device);
  ds.ooms = oom_reports(in, rr, bc, begin, ds.device);
  if (!ds.ooms.empty()) {
    std::vector<int32_t> entries;
    for (const OomReport& o : ds.ooms) entries.push_back(static_cast<int32_t>(o.event));
    const std::vector<SimulatedFix> fixes = whatif::simulated_fixes(in.snap, d, entries);
    for (size_t i = 0; i < fixes.size(); ++i) cite_fix(ds.ooms[i], fixes[i]);
  }
  return ds;
}

}  // namespace

Summary summarize(const Snapshot& snap, const SummaryOptions& opts) {
  Summary sum;
  sum.user_code = opts.user_code.patterns;
  FrameClassifier fc(snap, opts.user_code);
  size_t ndev = snap.device_count();
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && s.device < 1024) ndev = std::max(ndev, static_cast<size_t>(s.device + 1));
  sum.devices_listed = ndev;
  sum.estimate = read_estimate_note(snap);
  alloc::Settings cfg = alloc::Settings::recorded(snap);
  const std::vector<StorageTag> tags = read_tags(snap);
  const Holders holders = read_holders(snap);
  const DeviceInputs in{snap, fc, cfg, overflow_flag(snap), tags, holders, opts.top_sites};
  // The notes (a walk over every number of the snapshot) are made beside
  // the first replay big enough for a second thread, else beside all the
  // devices' summaries.
  std::function<void()> notes = [&] { sum.input_notes = snapshot_input_notes(snap); };
  bool big = false;
  for (size_t d = 0; d < snap.device_count() && !big; ++d)
    big = snap.device_rows(d).second - snap.device_rows(d).first >= kThreadedEntries;
  auto devices = [&](std::function<void()> side) {
    // Devices are alike when their summaries are the same but for the
    // device number and when they ran: times are compared from each
    // device's first entry (summary_times.h); each group keeps one summary,
    // however many devices the snapshot lists.
    AlikeDevices alike;
    std::vector<int64_t> first_time;  // of each group's first device
    for (size_t d = 0; d < ndev; ++d) {
      DeviceSummary ds = summarize_device(in, d, side);
      sum.total_entries += ds.entries;
      const int dev = ds.device;
      if (opts.group_alike) {
        const int64_t t0 = first_entry_time(snap, d);
        shift_times(ds, t0, 0);  // hashed as compared: from the first entry
        const uint64_t h = alike_hash(ds);
        shift_times(ds, 0, t0);
        if (alike.add(h, dev, [&](size_t g) {
              shift_times(ds, t0, first_time[g]);
              const bool same = alike_reports(sum.devices[g], ds);
              shift_times(ds, first_time[g], t0);
              return same;
            }))
          continue;
        first_time.push_back(t0);
      } else {
        alike.members().push_back({{dev, dev}});
      }
      sum.devices.push_back(std::move(ds));
    }
    sum.members = std::move(alike.members());
    if (side) side();
  };
  if (big)
    devices(notes);
  else
    parallel_for(2, threads_allowed(), [&](size_t i) { i == 0 ? notes() : devices({}); });
  return sum;
}

}  // namespace memsight
