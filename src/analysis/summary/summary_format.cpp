// summary_text. Events are named by their trace entry index within the
// device's trace ("trace entry 205"), as `memsight trace`, the page and the
// JSON number them.
#include <cstdio>

#include "analysis/alike/alike.h"
#include "analysis/frames/report_text.h"
#include "analysis/kinds/classify.h"
#include "memsight/summary.h"
#include "memsight/text_tools.h"
#include "util/escape.h"
#include "util/lines.h"

namespace memsight {
namespace {

std::string sz(int64_t v) { return format_bytes(static_cast<double>(v)); }

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

}  // namespace

std::string summary_text(const Snapshot& snap, const Summary& s, bool frames_all) {
  std::string out;
  FrameClassifier fc(snap, UserCode{s.user_code});
  for (size_t g = 0; g < s.devices.size(); ++g) {
    const DeviceSummary& d = s.devices[g];
    if (d.entries == 0 && d.segments_now == 0) continue;
    out += devices_heading(d.device, s.members[g]) + " - " + std::to_string(d.entries) +
           entries_word(d.entries) + ", " + std::to_string(d.segments_now) +
           (d.segments_now == 1 ? " segment\n" : " segments\n");
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
             (d.before_recording_start_count == 1 ? " block" : " blocks") +
             " was allocated before recording began (weights, optimizer state, ...)\n";
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
    if (d.categories_peak.totals.total() || d.categories_now.totals.total()) {
      out += "  what kind, at the allocated peak (" + category_sources_text(d.category_sources) +
             "):\n" + category_text(d.categories_peak, "    ");
      if (!d.categories_peak.modules.empty())
        out += "  by module at the allocated peak (each with its submodules):\n" +
               module_text(d.categories_peak, "    ");
      out += wrap_words("what kind, at the snapshot: " + category_line(d.categories_now), "  ");
    }
    for (const OomReport& o : d.ooms) {
      out += "  OUT OF MEMORY at trace entry " + std::to_string(o.event) + ": ";
      out += oom_cause_name(o.verdict);
      if (o.causes.size() > 1) {
        out += " (with ";
        for (size_t i = 1; i < o.causes.size(); ++i) {
          if (i > 1) out += ", ";
          out += oom_cause_name(o.causes[i]);
        }
        out += ")";
      }
      out += '\n' + wrap_words(o.explanation, "    ");
      if (o.categories.totals.total())
        out += wrap_words("By kind: " + category_line(o.categories) + ".", "    ");
      if (o.stack) {
        out += "    requested from: " + o.site + '\n';
        if (frames_all) all_frames(out, fc, o.stack, "        ");
      }
      for (const Remedy& r : o.remedies) {
        std::string w = wrap_words(r.text, "      ");
        out += "    - " + w.substr(6);
      }
    }
    out += '\n';
  }
  if (out.empty()) out = "The snapshot has no segments and no trace: nothing to report.\n";
  if (!s.input_notes.empty()) out = s.input_notes.text("input: ") + '\n' + out;
  return out;
}

}  // namespace memsight
