// summary_text / summary_json. Events are named by their trace entry index
// within the device's trace ("trace entry 205"), as `memsight trace`, the page
// and the JSON number them.
#include <cstdio>

#include "memsight/summary.h"
#include "memsight/text_tools.h"
#include "util/escape.h"

namespace memsight {
namespace {

std::string sz(int64_t v) { return format_size(static_cast<double>(v)); }

std::string when(const Snapshot& snap, const DeviceSummary& d, int64_t event, int64_t time_us) {
  if (event < 0) return "before the first trace entry";
  std::string s = "after trace entry " + std::to_string(event) + " of " + std::to_string(d.entries);
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

void all_frames(std::string& out, const FrameClassifier& fc, StackId stack, const char* indent) {
  const Snapshot& snap = fc.snapshot();
  for (FrameId id : snap.frames.stack(stack)) {
    char tag[16];
    std::snprintf(tag, sizeof tag, "%-9s", std::string(frame_kind_name(fc.kind(id))).c_str());
    out += indent;
    out += tag;
    fc.frame_key(id).append_to(out);
    out += '\n';
  }
}

void json_stack(std::string& out, const FrameClassifier& fc, StackId stack) {
  const Snapshot& snap = fc.snapshot();
  out += '[';
  bool first = true;
  for (FrameId id : snap.frames.stack(stack)) {
    const Frame& f = snap.frames.frame(id);
    if (!first) out += ',';
    first = false;
    out += "{\"name\":";
    append_json_string(out, shown_text(snap.str(f.name)));
    out += ",\"filename\":";
    append_json_string(out, shown_text(snap.str(f.filename)));
    out += ",\"line\":" + std::to_string(f.line) + ",\"kind\":\"";
    out += frame_kind_name(fc.kind(id));
    out += "\"}";
  }
  out += ']';
}

void json_strings(std::string& out, const std::vector<std::string>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, v[i]);
  }
  out += ']';
}

std::string num(int64_t v) { return std::to_string(v); }

// Words of `text` in lines of at most `width` columns, each line indented.
std::string wrapped(std::string_view text, const std::string& indent, size_t width = 100) {
  std::string out, line;
  while (!text.empty()) {
    size_t sp = text.find(' ');
    std::string_view word = text.substr(0, sp);
    text = sp == std::string_view::npos ? std::string_view() : text.substr(sp + 1);
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) {
      out += indent + line + '\n';
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty()) out += indent + line + '\n';
  return out;
}

void device_json(std::string& out, const FrameClassifier& fc, const DeviceSummary& d) {
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
    append_json_string(out, o.verdict);
    out += ",\"causes\":";
    json_strings(out, o.causes);
    out += ",\"explanation\":";
    append_json_string(out, o.explanation);
    out += ",\"remedies\":";
    json_strings(out, o.remedies);
    out += ",\"site\":";
    append_json_string(out, o.site);
    out += ",\"frames\":";
    json_stack(out, fc, o.stack);
    out += '}';
  }
  out += "]}";
}

}  // namespace

std::string summary_text(const Snapshot& snap, const Summary& s, bool frames_all) {
  std::string out;
  if (s.devices.empty()) return "The snapshot has no segments and no trace: nothing to report.\n";
  FrameClassifier fc(snap, UserCode{s.user_code});
  for (const DeviceSummary& d : s.devices) {
    if (d.entries == 0 && d.segments_now == 0) continue;
    out += "Device " + std::to_string(d.device) + " - " + std::to_string(d.entries) +
           " trace entries, " + std::to_string(d.segments_now) + " segments\n";
    out += "  peak allocated  " + sz(d.peak_allocated) + ", " +
           when(snap, d, d.peak_allocated_event, d.peak_allocated_time_us) + "\n";
    out += "  peak active     " + sz(d.peak_active) + ", " +
           when(snap, d, d.peak_active_event, d.peak_active_time_us) + "\n";
    out += "  peak reserved   " + sz(d.peak_reserved) + ", " +
           when(snap, d, d.peak_reserved_event, d.peak_reserved_time_us) + "\n";
    out += "  at the snapshot " + sz(d.allocated_now) + " allocated, " + sz(d.active_now) +
           " active, " + sz(d.reserved_now) + " reserved\n";
    out += d.exact ? "  these are torch's counters (max_memory_allocated, active_bytes, "
                     "max_memory_reserved), replayed block by block\n"
                   : "  peaks are lower bounds: " + d.exactness + "\n";
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
    if (d.before_recording_start_count)
      out += "  before recording " + sz(d.before_recording_start_bytes) + " in " +
             std::to_string(d.before_recording_start_count) +
             " blocks was allocated before recording began (weights, optimizer state, ...)\n";
    if (!d.top_sites.empty() || d.before_recording_count) {
      out += "  live at the allocated peak, by allocation site (innermost user frame):\n";
      for (const SiteStat& site : d.top_sites) {
        char line[64];
        std::snprintf(line, sizeof line, "    %10s %6lld x  ", sz(site.bytes).c_str(),
                      static_cast<long long>(site.count));
        out += line + fc.describe(site.stack) + '\n';
        if (frames_all) all_frames(out, fc, site.stack, "                          ");
      }
      if (d.sites_total > static_cast<int64_t>(d.top_sites.size()))
        out += "    ... " + std::to_string(d.sites_total - d.top_sites.size()) + " more sites\n";
      if (d.before_recording_count) {
        char line[64];
        std::snprintf(line, sizeof line, "    %10s %6lld x  ", sz(d.before_recording_bytes).c_str(),
                      static_cast<long long>(d.before_recording_count));
        out += std::string(line) + "allocated before recording began\n";
      }
    }
    for (const OomReport& o : d.ooms) {
      out += "  OUT OF MEMORY at trace entry " + std::to_string(o.event) + ": " + o.verdict;
      if (o.causes.size() > 1) {
        out += " (with ";
        for (size_t i = 1; i < o.causes.size(); ++i) out += (i > 1 ? ", " : "") + o.causes[i];
        out += ")";
      }
      out += '\n' + wrapped(o.explanation, "    ");
      if (o.stack) {
        out += "    requested from: " + o.site + '\n';
        if (frames_all) all_frames(out, fc, o.stack, "        ");
      }
      for (const std::string& r : o.remedies) {
        std::string w = wrapped(r, "      ");
        out += "    - " + w.substr(6);
      }
    }
    out += '\n';
  }
  return out;
}

std::string summary_json(const Snapshot& snap, const Summary& s, bool every_device) {
  FrameClassifier fc(snap, UserCode{s.user_code});
  std::string out = "{\"total_entries\":" + std::to_string(s.total_entries) +
                    ",\"event_numbering\":\"trace entry index within the device's trace\"" +
                    ",\"user_code\":";
  json_strings(out, s.user_code);
  out += ",\"devices\":[";
  if (every_device && s.empty_device) {
    // The devices left out of the Summary, in their places, from its template.
    DeviceSummary empty = *s.empty_device;
    size_t next = 0;
    for (size_t d = 0; d < s.devices_listed; ++d) {
      if (d) out += ',';
      if (next < s.devices.size() && s.devices[next].device == static_cast<int>(d)) {
        device_json(out, fc, s.devices[next++]);
      } else {
        empty.device = static_cast<int>(d);
        device_json(out, fc, empty);
      }
    }
  } else {
    for (size_t i = 0; i < s.devices.size(); ++i) {
      if (i) out += ',';
      device_json(out, fc, s.devices[i]);
    }
  }
  out += "]}\n";
  return out;
}

}  // namespace memsight
