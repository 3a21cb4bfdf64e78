// summary_text. Events are named by their trace entry index within the
// device's trace ("trace entry 205"), as `memsight trace`, the page and the
// JSON number them.
#include <cstdio>

#include "analysis/alike/alike.h"
#include "analysis/frames/report_text.h"
#include "analysis/kinds/classify.h"
#include "analysis/summary/held_text.h"
#include "analysis/summary/summary_estimate.h"
#include "memsight/summary.h"
#include "util/escape.h"
#include "util/lines.h"
#include "util/text_format.h"

namespace memsight {
namespace {

std::string when(const Snapshot& snap, const DeviceSummary& d, int64_t event, int64_t time_us) {
  if (event < 0)
    return d.entries
               ? "before the first trace entry"
               : "at the snapshot (no allocation history: the run's peak may have been higher)";
  std::string s = "after trace entry " + count_text(event) + " of " + count_text(d.entries);
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

namespace {

// The peaks, the state at the snapshot, the cache and the history.
void counters_text(std::string& out, const Snapshot& snap, const DeviceSummary& d) {
  out += "  peak allocated  " + format_bytes(d.peak_allocated) + ", " +
         when(snap, d, d.peak_allocated_event, d.peak_allocated_time_us) + "\n";
  out += "  peak active     " + format_bytes(d.peak_active) + ", " +
         when(snap, d, d.peak_active_event, d.peak_active_time_us) + "\n";
  out += "  peak reserved   " + format_bytes(d.peak_reserved) + ", " +
         when(snap, d, d.peak_reserved_event, d.peak_reserved_time_us) + "\n";
  out += "  at the snapshot " + format_bytes(d.allocated_now) + " allocated, " +
         format_bytes(d.active_now) + " active, " + format_bytes(d.reserved_now) + " reserved\n";
  out += d.exact ? "  these are torch's counters (max_memory_allocated, active_bytes, "
                   "max_memory_reserved), replayed block by block\n"
                 : "  peaks are lower bounds: " + d.exactness + "\n";
  out += "  cached free     " + format_bytes(d.free_now) + " in " +
         count_of(d.free_blocks_now, "block") + ", largest " + format_bytes(d.largest_free_now) +
         " (fragmentation " + percent(d.fragmentation) + ")" +
         (d.graph_pools ? ", outside graph pools" : "") + "\n";
  if (d.graph_pools)
    out += "  graph pools     " + format_bytes(d.graph_pool_reserved) + " reserved in " +
           count_of(d.graph_pools, "private pool") + " of CUDA graphs, " +
           format_bytes(d.graph_pool_allocated) + " allocated, " + format_bytes(d.graph_pool_free) +
           " free: kept for the graphs' replays (not the cache, not fragmentation)\n";
  out += "  history         ";
  if (d.history_wrapped == "yes")
    out += "the ring buffer overflowed: the oldest events were dropped\n";
  else if (!d.entries)
    out +=
        "none: the device's trace is empty, only its state at the snapshot is known (as "
        "recorded with enabled=\"state\")\n";
  else if (d.history_wrapped == "possibly")
    out += count_of(d.orphan_frees, "free") +
           " of allocations not in the trace (made before recording began, or dropped "
           "when the buffer wrapped)\n";
  else
    out += "complete: every freed allocation was recorded\n";
  if (d.before_recording_start_count)
    out += "  before recording " + format_bytes(d.before_recording_start_bytes) + " in " +
           count_of(d.before_recording_start_count, "block") +
           " was allocated before recording began (weights, optimizer state, ...)\n";
}

// "    SIZE  COUNT x  " before a site.
std::string site_columns(int64_t bytes, int64_t count) {
  char line[64];
  std::snprintf(line, sizeof line, "    %10s %6s x  ", format_bytes(bytes).c_str(),
                count_text(count).c_str());
  return line;
}

// The sites live at the allocated peak, and what was there before recording.
void sites_text(std::string& out, const FrameClassifier& fc, const DeviceSummary& d,
                bool frames_all) {
  if (d.top_sites.empty() && !d.before_recording_count) return;
  out += "  live at the allocated peak, by allocation site (innermost user frame):\n";
  for (const SiteStat& site : d.top_sites) {
    out += site_columns(site.bytes, site.count) + fc.describe(site.stack) + '\n';
    if (frames_all) all_frames(out, fc, site.stack, "                          ");
  }
  if (d.sites_total > static_cast<int64_t>(d.top_sites.size()))
    out += "    ... " +
           count_of(d.sites_total - static_cast<int64_t>(d.top_sites.size()), "more site") + '\n';
  if (d.before_recording_count)
    out += site_columns(d.before_recording_bytes, d.before_recording_count) +
           "allocated before recording began\n";
}

void kinds_text(std::string& out, const DeviceSummary& d) {
  if (!d.categories_peak.totals.total() && !d.categories_now.totals.total()) return;
  out += "  what kind, at the allocated peak (" + category_sources_text(d.category_sources) +
         "):\n" + category_text(d.categories_peak, "    ");
  if (!d.categories_peak.modules.empty())
    out += "  by module at the allocated peak (each with its submodules):\n" +
           module_text(d.categories_peak, "    ");
  out += wrap_words("what kind, at the snapshot: " + category_line(d.categories_now), "  ");
}

// An OOM's causes, diagnosis, kinds, where it was requested and what to change.
void oom_text(std::string& out, const FrameClassifier& fc, const OomReport& o, bool frames_all) {
  out += "  OUT OF MEMORY at trace entry " + count_text(o.event) + ": ";
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

}  // namespace

std::string summary_text(const Snapshot& snap, const Summary& s, bool frames_all) {
  std::string out;
  FrameClassifier fc(snap, UserCode{s.user_code});
  for (size_t g = 0; g < s.devices.size(); ++g) {
    const DeviceSummary& d = s.devices[g];
    if (d.entries == 0 && d.segments_now == 0) continue;
    out += devices_heading(d.device, s.members[g]) + " - " +
           count_of(d.entries, "trace entry", "trace entries") + ", " +
           count_of(d.segments_now, "segment") + '\n';
    counters_text(out, snap, d);
    sites_text(out, fc, d, frames_all);
    kinds_text(out, d);
    held_text(out, d.held);
    for (const OomReport& o : d.ooms) oom_text(out, fc, o, frames_all);
    out += '\n';
  }
  if (out.empty()) out = "The snapshot has no segments and no trace: nothing to report.\n";
  if (!s.input_notes.empty()) out = s.input_notes.text("input: ") + '\n' + out;
  return estimate_note_text(s.estimate) + out;
}

}  // namespace memsight
