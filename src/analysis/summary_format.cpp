// summary_text / summary_json.
#include <cstdio>

#include "memsight/summary.h"
#include "memsight/text_tools.h"
#include "util/escape.h"

namespace memsight {
namespace {

std::string sz(int64_t v) { return format_size(static_cast<double>(v)); }

std::string when(const Snapshot& snap, const DeviceSummary& d, int64_t event, int64_t time_us) {
  if (event < 0) return "before the first recorded event";
  std::string s = "at trace entry " + std::to_string(event) + " of " + std::to_string(d.entries);
  auto [begin, end] = d.device < static_cast<int>(snap.device_count())
                          ? snap.device_rows(static_cast<size_t>(d.device))
                          : std::pair<uint32_t, uint32_t>{0, 0};
  if (begin < end && time_us) {
    double secs = static_cast<double>(time_us - snap.trace.time_us[begin]) / 1e6;
    char buf[64];
    std::snprintf(buf, sizeof buf, " (%.3f s after the first)", secs);
    s += buf;
  }
  return s;
}

void json_stack(std::string& out, const Snapshot& snap, StackId stack) {
  out += '[';
  bool first = true;
  for (FrameId id : snap.frames.stack(stack)) {
    const Frame& f = snap.frames.frame(id);
    if (!first) out += ',';
    first = false;
    out += "{\"name\":";
    append_json_string(out, snap.str(f.name));
    out += ",\"filename\":";
    append_json_string(out, snap.str(f.filename));
    out += ",\"line\":" + std::to_string(f.line) + '}';
  }
  out += ']';
}

}  // namespace

std::string summary_text(const Snapshot& snap, const Summary& s) {
  std::string out;
  if (s.devices.empty()) return "The snapshot has no segments and no trace: nothing to report.\n";
  for (const DeviceSummary& d : s.devices) {
    if (d.entries == 0 && d.segments_now == 0) continue;
    out += "Device " + std::to_string(d.device) + " - " + std::to_string(d.entries) +
           " trace entries, " + std::to_string(d.segments_now) + " segments\n";
    out += "  peak allocated  " + sz(d.peak_allocated) + ", " +
           when(snap, d, d.peak_allocated_event, d.peak_allocated_time_us) + "\n";
    out += "  peak reserved   " + sz(d.peak_reserved) + ", " +
           when(snap, d, d.peak_reserved_event, d.peak_reserved_time_us) + "\n";
    out += "  at the snapshot " + sz(d.allocated_now) + " allocated, " + sz(d.reserved_now) +
           " reserved\n";
    char frag[160];
    std::snprintf(frag, sizeof frag,
                  "  cached free     %s in %lld blocks, largest %s (fragmentation %.1f%%)\n",
                  sz(d.free_now).c_str(), static_cast<long long>(d.free_blocks_now),
                  sz(d.largest_free_now).c_str(), d.fragmentation * 100);
    out += frag;
    out += "  history         ";
    if (d.history_wrapped == "yes")
      out += "the ring buffer overflowed: the oldest events were dropped\n";
    else if (d.history_wrapped == "possibly")
      out += std::to_string(d.orphan_frees) +
             " frees of allocations not in the trace (made before recording began, or dropped "
             "when the buffer wrapped)\n";
    else
      out += "complete: every freed allocation was recorded\n";
    if (!d.top_sites.empty()) {
      out += "  live at the allocated peak, by allocation site:\n";
      for (const SiteStat& site : d.top_sites) {
        char line[64];
        std::snprintf(line, sizeof line, "    %10s %6lld x  ", sz(site.bytes).c_str(),
                      static_cast<long long>(site.count));
        out += line + describe_stack(snap, site.stack) + '\n';
      }
    }
    for (const OomReport& o : d.ooms) {
      out += "  OUT OF MEMORY at trace entry " + std::to_string(o.event) + " (" + o.verdict + ")\n";
      out += "    " + o.explanation + '\n';
      if (o.stack) out += "    requested from: " + describe_stack(snap, o.stack, 4) + '\n';
    }
    out += '\n';
  }
  return out;
}

std::string summary_json(const Snapshot& snap, const Summary& s) {
  std::string out = "{\"total_entries\":" + std::to_string(s.total_entries) + ",\"devices\":[";
  bool first_dev = true;
  for (const DeviceSummary& d : s.devices) {
    if (!first_dev) out += ',';
    first_dev = false;
    char frag[32];
    std::snprintf(frag, sizeof frag, "%.6f", d.fragmentation);
    out += "{\"device\":" + std::to_string(d.device) + ",\"entries\":" + std::to_string(d.entries) +
           ",\"peak_allocated\":" + std::to_string(d.peak_allocated) +
           ",\"peak_allocated_event\":" + std::to_string(d.peak_allocated_event) +
           ",\"peak_allocated_time_us\":" + std::to_string(d.peak_allocated_time_us) +
           ",\"peak_reserved\":" + std::to_string(d.peak_reserved) +
           ",\"peak_reserved_event\":" + std::to_string(d.peak_reserved_event) +
           ",\"peak_reserved_time_us\":" + std::to_string(d.peak_reserved_time_us) +
           ",\"allocated_now\":" + std::to_string(d.allocated_now) +
           ",\"reserved_now\":" + std::to_string(d.reserved_now) +
           ",\"segments_now\":" + std::to_string(d.segments_now) +
           ",\"free_now\":" + std::to_string(d.free_now) +
           ",\"free_blocks_now\":" + std::to_string(d.free_blocks_now) +
           ",\"largest_free_now\":" + std::to_string(d.largest_free_now) +
           ",\"fragmentation\":" + frag + ",\"orphan_frees\":" + std::to_string(d.orphan_frees) +
           ",\"history_wrapped\":";
    append_json_string(out, d.history_wrapped);
    out += ",\"top_sites\":[";
    for (size_t i = 0; i < d.top_sites.size(); ++i) {
      const SiteStat& site = d.top_sites[i];
      if (i) out += ',';
      out += "{\"bytes\":" + std::to_string(site.bytes) +
             ",\"count\":" + std::to_string(site.count) + ",\"site\":";
      append_json_string(out, describe_stack(snap, site.stack));
      out += ",\"frames\":";
      json_stack(out, snap, site.stack);
      out += '}';
    }
    out += "],\"ooms\":[";
    for (size_t i = 0; i < d.ooms.size(); ++i) {
      const OomReport& o = d.ooms[i];
      if (i) out += ',';
      out += "{\"event\":" + std::to_string(o.event) + ",\"time_us\":" + std::to_string(o.time_us) +
             ",\"requested\":" + std::to_string(o.requested) +
             ",\"device_free\":" + std::to_string(o.device_free) +
             ",\"allocated\":" + std::to_string(o.allocated) +
             ",\"reserved\":" + std::to_string(o.reserved) +
             ",\"cached_free\":" + std::to_string(o.cached_free) +
             ",\"largest_free\":" + std::to_string(o.largest_free) + ",\"verdict\":";
      append_json_string(out, o.verdict);
      out += ",\"explanation\":";
      append_json_string(out, o.explanation);
      out += ",\"frames\":";
      json_stack(out, snap, o.stack);
      out += '}';
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace memsight
