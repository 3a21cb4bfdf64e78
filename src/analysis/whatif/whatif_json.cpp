// `memsight whatif --json` (see whatif.h).
#include "analysis/alike/alike.h"
#include "analysis/whatif/whatif.h"
#include "memsight/whatif.h"
#include "util/json_writer.h"

namespace memsight::whatif {
namespace {

void json_event(JsonWriter& w, const simulate::SegmentEvent& e) {
  w.begin_object()
      .field("action", action_name(e.action))
      .field("size", e.size)
      .field("entry", e.owner)
      .end_object();
}

void json_entries(JsonWriter& w, const std::vector<int32_t>& v) {
  w.begin_array();
  for (int32_t e : v) w.value(e);
  w.end_array();
}

void json_oom(JsonWriter& w, const simulate::Oom& o) {
  w.begin_object()
      .field("event", o.event)
      .field("requested", o.requested)
      .field("recorded", o.recorded)
      .field("cause", o.cap ? "limit" : "device")
      .field("reserved", o.reserved)
      .field("allocated", o.allocated)
      .field("cached_free", o.free.bytes)
      .end_object();
}

void json_outcome(JsonWriter& w, const DeviceReport& d, const Outcome& o) {
  const simulate::Result& r = o.result;
  w.begin_object()
      .field("settings", o.alt.label)
      .field("conf", o.alt.settings.conf())
      .field("recorded", o.alt.recorded)
      .field("peak_reserved", r.peak.reserved)
      .field("peak_reserved_event", r.peak_reserved_event)
      .field("peak_allocated", r.peak.allocated)
      .field("unused_at_peak", r.unused_at_peak)
      .field("allocated_outside_segments_at_peak", r.outside_at_peak)
      .field("largest_free_at_peak", r.largest_free_at_peak)
      .field("segments_created", r.segments_created)
      .field("segments_placed_unanchored", r.segments_placed_unanchored)
      .key("ooms")
      .begin_array();
  for (const simulate::Oom& oom : r.ooms) json_oom(w, oom);
  w.end_array().key("recorded_ooms_avoided");
  std::vector<int32_t> avoided, avoided_high;
  for (int32_t e : d.recorded_ooms) {
    if (avoids(o, e)) avoided.push_back(e);
    if (avoids(o, e, true)) avoided_high.push_back(e);
  }
  json_entries(w, avoided);
  if (o.at_cap_high) {
    w.key("at_cap_high")
        .begin_object()
        .field("limit", o.alt.device.limit_high)
        .field("peak_reserved", o.at_cap_high->peak.reserved)
        .field("stopped_at", o.at_cap_high->stopped_at)
        .key("recorded_ooms_avoided");
    json_entries(w, avoided_high);
    w.end_object();
  }
  w.field("stopped_at", r.stopped_at)
      .field("postponed_by", postponed_by(d, o))
      .field("note", o.alt.note)
      .end_object();
}

void json_self_check(JsonWriter& w, const SelfCheck& c) {
  w.begin_object()
      .field("ok", c.ok())
      .field("incomplete", c.incomplete)
      .field("segment_events", c.events)
      .field("matching_events", c.matching)
      .key("first_difference");
  if (c.differs) {
    w.begin_object().field("index", c.matching).key("recorded");
    if (c.recorded_missing)
      w.null();
    else
      json_event(w, c.recorded);
    w.key("simulated");
    if (c.simulated_missing)
      w.null();
    else
      json_event(w, c.simulated);
    w.end_object();
  } else {
    w.null();
  }
  w.field("peak_reserved_recorded", c.peak_recorded)
      .field("peak_reserved_simulated", c.peak_simulated)
      .field("allocations", c.allocations)
      .field("misplaced", c.misplaced)
      .key("ooms_simulated");
  json_entries(w, c.ooms_simulated);
  w.end_object();
}

}  // namespace

void device_json(JsonWriter& w, const DeviceReport& d, bool table, const DeviceRanges* alike) {
  w.begin_object()
      .field("device", d.device)
      .field("entries", d.entries)
      .field("recorded_settings", d.recorded_conf)
      .key("ignored_settings")
      .begin_array();
  for (const std::string& why : d.ignored_settings) w.value(why);
  w.end_array()
      .field("state_only", d.state_only)
      .key("truncation")
      .begin_object()
      .field("ends_at_oom", d.truncation.ends_at_oom)
      .field("growth", d.truncation.growth)
      .field("window", d.truncation.window)
      .field("unit", d.truncation.by_steps ? "steps" : "entries")
      .field("steady", d.truncation.steady)
      .end_object()
      .field("self_check_on_recorded_device", d.check_on_recorded_device)
      .key("memory")
      .begin_object()
      .field("total", d.memory.total)
      .field("capacity", d.memory.capacity)
      .field("limit", d.memory.limit)
      .field("limit_inferred", d.memory.limit_inferred)
      .field("limit_at_most", d.memory.limit_inferred ? d.memory.limit_high : int64_t{-1})
      .end_object()
      .key("recorded_ooms");
  json_entries(w, d.recorded_ooms);
  w.key("self_check");
  json_self_check(w, d.check);
  w.key("results").begin_array();
  for (const Outcome& o : d.outcomes)
    if (table || !o.alt.recorded) json_outcome(w, d, o);
  w.end_array();
  if (alike) append_alike_json(w, *alike);
  w.end_object();
}

std::string json(const Report& r) {
  std::string out;
  JsonWriter w(out);
  w.begin_document()
      .field("event_numbering", "trace entry index within the device's trace")
      .key("devices")
      .begin_array();
  for (size_t i = 0; i < r.devices.size(); ++i) {
    const bool alike = i < r.members.size() && several(r.members[i]);
    device_json(w, r.devices[i], r.table, alike ? &r.members[i] : nullptr);
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

}  // namespace memsight::whatif
