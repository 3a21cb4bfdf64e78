// summary_json: each device's summary as JSON (one object per device the
// snapshot lists, or per group of alike devices for the page).
#include "analysis/summary/summary_json.h"

#include <cstdio>

#include "analysis/alike/alike.h"
#include "analysis/kinds/classify.h"
#include "analysis/frames/report_text.h"
#include "memsight/input_limits.h"
#include "util/escape.h"

namespace memsight {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

void device_json(std::string& out, const FrameClassifier& fc, const DeviceSummary& d,
                 const std::vector<std::pair<int, int>>* alike) {
  char frag[32];
  std::snprintf(frag, sizeof frag, "%.6f", d.fragmentation);
  out += "{\"device\":" + std::to_string(d.device) + ",\"entries\":" + std::to_string(d.entries) +
         ",\"peak_allocated\":" + num(d.peak_allocated) +
         ",\"peak_allocated_event\":" + num(d.peak_allocated_event) +
         ",\"peak_allocated_time_us\":" + num(d.peak_allocated_time_us) +
         ",\"peak_active\":" + num(d.peak_active) +
         ",\"peak_active_event\":" + num(d.peak_active_event) +
         ",\"peak_active_time_us\":" + num(d.peak_active_time_us) +
         ",\"peak_reserved\":" + num(d.peak_reserved) +
         ",\"peak_reserved_event\":" + num(d.peak_reserved_event) +
         ",\"peak_reserved_time_us\":" + num(d.peak_reserved_time_us) +
         ",\"peak_requested\":" + num(d.peak_requested) +
         ",\"allocated_now\":" + num(d.allocated_now) + ",\"active_now\":" + num(d.active_now) +
         ",\"requested_now\":" + num(d.requested_now) + ",\"reserved_now\":" + num(d.reserved_now) +
         ",\"segments_now\":" + num(d.segments_now) + ",\"free_now\":" + num(d.free_now) +
         ",\"free_blocks_now\":" + num(d.free_blocks_now) +
         ",\"largest_free_now\":" + num(d.largest_free_now) + ",\"fragmentation\":" + frag +
         ",\"orphan_frees\":" + num(d.orphan_frees) + ",\"history_wrapped\":";
  append_json_string(out, d.history_wrapped);
  out += std::string(",\"exact\":") + (d.exact ? "true" : "false") + ",\"exactness\":";
  append_json_string(out, d.exactness);
  out += ",\"before_recording\":{\"bytes\":" + num(d.before_recording_start_bytes) +
         ",\"count\":" + num(d.before_recording_start_count) +
         ",\"bytes_at_peak\":" + num(d.before_recording_bytes) +
         ",\"count_at_peak\":" + num(d.before_recording_count) + "}";
  out += ",\"sites_total\":" + num(d.sites_total) + ",\"top_sites\":[";
  for (size_t i = 0; i < d.top_sites.size(); ++i) {
    const SiteStat& site = d.top_sites[i];
    if (i) out += ',';
    out += "{\"bytes\":" + num(site.bytes) + ",\"count\":" + num(site.count) + ",\"site\":";
    append_json_string(out, site.site);
    out += ",\"site_kind\":\"";
    out += frame_kind_name(site.kind);
    out += "\",\"stack\":";
    append_json_string(out, fc.describe(site.stack));
    out += ",\"frames\":";
    json_stack(out, fc, site.stack);
    out += '}';
  }
  out += "],\"ooms\":[";
  for (size_t i = 0; i < d.ooms.size(); ++i) {
    const OomReport& o = d.ooms[i];
    if (i) out += ',';
    out += "{\"event\":" + num(o.event) + ",\"time_us\":" + num(o.time_us) +
           ",\"requested\":" + num(o.requested) + ",\"pool\":\"" + o.pool +
           "\",\"device_free\":" + num(o.device_free) + ",\"device_total\":" + num(o.device_total) +
           ",\"limit\":" + num(o.limit) + ",\"allocated\":" + num(o.allocated) +
           ",\"active\":" + num(o.active) + ",\"reserved\":" + num(o.reserved) +
           ",\"cached_free\":" + num(o.cached_free) + ",\"largest_free\":" + num(o.largest_free) +
           ",\"largest_free_in_pool\":" + num(o.largest_free_pool) +
           ",\"releasable\":" + num(o.releasable) + ",\"verdict\":";
    append_json_string(out, oom_cause_name(o.verdict));
    out += ",\"causes\":";
    json_strings(out, oom_cause_names(o.causes));
    out += ",\"explanation\":";
    append_json_string(out, o.explanation);
    out += ",\"remedies\":";
    json_strings(out, remedy_texts(o.remedies));
    out += ",\"simulated\":";
    append_json_string(out, o.simulated);
    out += ",\"site\":";
    append_json_string(out, o.site);
    out += ",\"frames\":";
    json_stack(out, fc, o.stack);
    out += ",\"categories\":";
    append_category_view_json(out, o.categories);
    out += '}';
  }
  out += "],\"categories\":{\"sources\":";
  append_category_sources_json(out, d.category_sources);
  out += ",\"at_peak\":";
  append_category_view_json(out, d.categories_peak);
  out += ",\"at_snapshot\":";
  append_category_view_json(out, d.categories_now);
  out += '}';
  if (alike) append_alike_json(out, *alike);
  out += '}';
}

std::string summary_json(const Snapshot& snap, const Summary& s, DeviceListing listing) {
  FrameClassifier fc(snap, UserCode{s.user_code});
  std::string out = "{\"total_entries\":" + std::to_string(s.total_entries) +
                    ",\"event_numbering\":\"trace entry index within the device's trace\"" +
                    ",\"user_code\":";
  json_strings(out, s.user_code);
  out += ",\"input_notes\":" + s.input_notes.json();
  out += ",\"devices\":[";
  bool first = true;
  if (listing == DeviceListing::Every) {
    // Every device in its place, from its group's summary.
    std::vector<uint32_t> group(s.devices_listed, 0);
    for (size_t g = 0; g < s.members.size(); ++g)
      for (auto [a, b] : s.members[g])
        for (int d = a; d <= b; ++d) group[static_cast<size_t>(d)] = static_cast<uint32_t>(g);
    // Room for it all first: each group's JSON is as long for each of its
    // devices but for the device number's digits (a string that doubles as
    // it grows would hold up to twice the JSON of 100,000 devices).
    size_t total = out.size() + s.devices_listed + 4;
    std::string scratch;
    for (size_t g = 0; g < s.members.size(); ++g) {
      scratch.clear();
      device_json(scratch, fc, s.devices[g]);
      const size_t digits = std::to_string(s.devices[g].device).size();
      for (auto [a, b] : s.members[g])
        for (int d = a; d <= b; ++d) total += scratch.size() - digits + std::to_string(d).size();
    }
    std::string().swap(scratch);
    out.reserve(total);
    DeviceSummary one;
    for (size_t d = 0; d < s.devices_listed; ++d) {
      if (!first) out += ',';
      first = false;
      const DeviceSummary& g = s.devices[group[d]];
      if (g.device == static_cast<int>(d)) {
        device_json(out, fc, g);
      } else {
        one = g;
        one.device = static_cast<int>(d);
        device_json(out, fc, one);
      }
    }
  } else {
    // The groups (with something on them, for the page), each once.
    for (size_t g = 0; g < s.devices.size(); ++g) {
      const DeviceSummary& d = s.devices[g];
      const auto& members = s.members[g];
      if (listing == DeviceListing::Page && d.entries == 0 && d.segments_now == 0) continue;
      if (!first) out += ',';
      first = false;
      device_json(out, fc, d,
                  several(members) || listing == DeviceListing::Groups ? &members : nullptr);
    }
  }
  out += "]}\n";
  return out;
}

}  // namespace memsight
