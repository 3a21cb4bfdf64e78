// summary_json: each device's summary as JSON (one object per device the
// snapshot lists, or per group of alike devices for the page).
#include "analysis/summary/summary_json.h"

#include "analysis/alike/alike.h"
#include "analysis/frames/report_text.h"
#include "analysis/kinds/classify.h"
#include "analysis/leaks/leak_holders.h"
#include "analysis/summary/summary_estimate.h"
#include "analysis/summary/summary_times.h"
#include "memsight/input_limits.h"
#include "util/json_writer.h"

namespace memsight {
namespace {

void sites_json(JsonWriter& w, const FrameClassifier& fc, const std::vector<SiteStat>& sites) {
  w.begin_array();
  for (const SiteStat& site : sites) {
    w.begin_object()
        .field("bytes", site.bytes)
        .field("count", site.count)
        .field("site", site.site)
        .field("site_kind", frame_kind_name(site.kind))
        .field("stack", fc.describe(site.stack))
        .key("frames");
    json_stack(w, fc, site.stack);
    w.end_object();
  }
  w.end_array();
}

void oom_json(JsonWriter& w, const FrameClassifier& fc, const OomReport& o) {
  w.begin_object()
      .field("event", o.event)
      .field("time_us", o.time_us)
      .field("requested", o.requested)
      .field("pool", o.pool)
      .field("device_free", o.device_free)
      .field("device_total", o.device_total)
      .field("limit", o.limit)
      .field("allocated", o.allocated)
      .field("active", o.active)
      .field("reserved", o.reserved)
      .field("cached_free", o.cached_free);
  if (o.graph_pool_free) w.field("graph_pool_free", o.graph_pool_free);
  w.field("largest_free", o.largest_free)
      .field("largest_free_in_pool", o.largest_free_pool)
      .field("releasable", o.releasable)
      .field("verdict", oom_cause_name(o.verdict))
      .key("causes");
  json_strings(w, oom_cause_names(o.causes));
  w.field("explanation", o.explanation).key("remedies");
  json_strings(w, remedy_texts(o.remedies));
  if (o.held_by.blocks) {
    w.key("held_by");
    held_amount_json(w, o.held_by);
  }
  w.field("simulated", o.simulated).field("site", o.site).key("frames");
  json_stack(w, fc, o.stack);
  w.key("categories");
  append_category_view_json(w, o.categories);
  w.end_object();
}

}  // namespace

void device_json(JsonWriter& w, const FrameClassifier& fc, const DeviceSummary& d,
                 const std::vector<std::pair<int, int>>* alike) {
  w.begin_object()
      .field("device", d.device)
      .field("entries", d.entries)
      .field("peak_allocated", d.peak_allocated)
      .field("peak_allocated_event", d.peak_allocated_event)
      .field("peak_allocated_time_us", d.peak_allocated_time_us)
      .field("peak_active", d.peak_active)
      .field("peak_active_event", d.peak_active_event)
      .field("peak_active_time_us", d.peak_active_time_us)
      .field("peak_reserved", d.peak_reserved)
      .field("peak_reserved_event", d.peak_reserved_event)
      .field("peak_reserved_time_us", d.peak_reserved_time_us)
      .field("peak_requested", d.peak_requested)
      .field("allocated_now", d.allocated_now)
      .field("active_now", d.active_now)
      .field("requested_now", d.requested_now)
      .field("reserved_now", d.reserved_now)
      .field("segments_now", d.segments_now)
      .field("free_now", d.free_now)
      .field("free_blocks_now", d.free_blocks_now)
      .field("largest_free_now", d.largest_free_now)
      .fixed_field("fragmentation", d.fragmentation, 6)
      .key("graph_pools")
      .begin_object()
      .field("pools", d.graph_pools)
      .field("reserved", d.graph_pool_reserved)
      .field("allocated", d.graph_pool_allocated)
      .field("free", d.graph_pool_free)
      .end_object()
      .field("orphan_frees", d.orphan_frees)
      .field("history_wrapped", d.history_wrapped)
      .field("exact", d.exact)
      .field("exactness", d.exactness)
      .key("before_recording")
      .begin_object()
      .field("bytes", d.before_recording_start_bytes)
      .field("count", d.before_recording_start_count)
      .field("bytes_at_peak", d.before_recording_bytes)
      .field("count_at_peak", d.before_recording_count)
      .end_object()
      .field("sites_total", d.sites_total)
      .key("top_sites");
  sites_json(w, fc, d.top_sites);
  if (!d.held.empty()) {  // only where memsight.torch named the holders at the dump
    w.key("holders").begin_array();
    for (const HeldAmount& h : d.held) held_amount_json(w, h);
    w.end_array();
  }
  w.key("ooms").begin_array();
  for (const OomReport& o : d.ooms) oom_json(w, fc, o);
  w.end_array().key("categories").begin_object().key("sources");
  append_category_sources_json(w, d.category_sources);
  w.key("at_peak");
  append_category_view_json(w, d.categories_peak);
  w.key("at_snapshot");
  append_category_view_json(w, d.categories_now);
  w.end_object();
  if (alike) append_alike_json(w, *alike);
  w.end_object();
}

namespace {

// Every device in its place, from its group's summary.
void every_device_json(JsonWriter& w, const FrameClassifier& fc, const Summary& s) {
  const Snapshot& snap = fc.snapshot();
  std::vector<uint32_t> group(s.devices_listed, 0);
  for (size_t g = 0; g < s.members.size(); ++g)
    for (auto [a, b] : s.members[g])
      for (int d = a; d <= b; ++d) group[static_cast<size_t>(d)] = static_cast<uint32_t>(g);
  // Room for it all first: each group's JSON is as long for each of its
  // devices but for the device number's digits (a string that doubles as
  // it grows would hold up to twice the JSON of 100,000 devices).
  size_t total = w.out().size() + s.devices_listed + 4;
  std::string scratch;
  for (size_t g = 0; g < s.members.size(); ++g) {
    scratch.clear();
    JsonWriter one_device(scratch);
    device_json(one_device, fc, s.devices[g]);
    const size_t digits = std::to_string(s.devices[g].device).size();
    for (auto [a, b] : s.members[g])
      for (int d = a; d <= b; ++d) total += scratch.size() - digits + std::to_string(d).size();
  }
  std::string().swap(scratch);
  w.out().reserve(total);
  DeviceSummary one;
  for (size_t d = 0; d < s.devices_listed; ++d) {
    const DeviceSummary& g = s.devices[group[d]];
    if (g.device == static_cast<int>(d)) {
      device_json(w, fc, g);
    } else {
      one = g;
      one.device = static_cast<int>(d);
      shift_times(one, first_entry_time(snap, static_cast<size_t>(g.device)),
                  first_entry_time(snap, d));
      device_json(w, fc, one);
    }
  }
}

}  // namespace

std::string summary_json(const Snapshot& snap, const Summary& s, DeviceListing listing) {
  FrameClassifier fc(snap, UserCode{s.user_code});
  std::string out;
  JsonWriter w(out);
  w.begin_document()
      .field("total_entries", s.total_entries)
      .field("event_numbering", "trace entry index within the device's trace")
      .key("user_code");
  json_strings(w, s.user_code);
  w.key("input_notes");
  s.input_notes.json(w);
  if (s.estimate.present) {  // only then: a recording's JSON stays as it was
    w.key("estimate");
    estimate_note_json(w, s.estimate);
  }
  w.key("devices").begin_array();
  if (listing == DeviceListing::Every) {
    every_device_json(w, fc, s);
  } else {
    // The groups (with something on them, for the page), each once.
    for (size_t g = 0; g < s.devices.size(); ++g) {
      const DeviceSummary& d = s.devices[g];
      const auto& members = s.members[g];
      if (listing == DeviceListing::Page && d.entries == 0 && d.segments_now == 0) continue;
      device_json(w, fc, d,
                  several(members) || listing == DeviceListing::Groups ? &members : nullptr);
    }
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

}  // namespace memsight
