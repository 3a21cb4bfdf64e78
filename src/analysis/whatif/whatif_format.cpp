// `memsight whatif` as text and JSON (see whatif.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/alike/alike.h"
#include "analysis/frames/report_text.h"
#include "analysis/whatif/whatif.h"
#include "memsight/error.h"
#include "memsight/whatif.h"
#include "util/float_chars.h"
#include "util/json_writer.h"
#include "util/text_format.h"

namespace memsight::whatif {
namespace {

std::string sz(int64_t v) { return format_bytes(static_cast<double>(v)); }

std::string between(int64_t lo, int64_t hi) {
  auto [a, b] = size_range(lo, hi);
  return a + " and " + b;
}

// The cap at the top of an inferred range, told apart from its bottom.
std::string cap_high(const simulate::Device& m) {
  return size_range(m.limit, m.limit_high + 1).second;
}

// now against was, relative: "+12.5%", "same".
std::string change(int64_t now, int64_t was) {
  if (now == was) return "same";
  return signed_percent(was ? static_cast<double>(now - was) / static_cast<double>(was) : 1.0);
}

std::string check_result(const DeviceReport& d);

std::string event(const simulate::SegmentEvent& e) {
  return "a " + sz(e.size) + " " + std::string(action_name(e.action)) + " for trace entry " +
         count_text(e.owner);
}

// `prefix` then `text` wrapped at 100 columns, later lines indented as far
// as the prefix.
std::string hang(const std::string& prefix, const std::string& text, size_t width = 100) {
  const std::string indent(prefix.size(), ' ');
  std::string out, line = prefix;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(pos, end - pos);
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      out += line + '\n';
      line = indent;
    }
    if (line.size() > indent.size() && line.back() != ' ') line += ' ';
    line += word;
    pos = end + 1;
  }
  return out + line + '\n';
}

std::string check_text(const DeviceReport& d) {
  std::string s = check_result(d);
  if (d.check_on_recorded_device)
    s += " (On the device as recorded; the results below are on the device asked for.)";
  return s;
}

std::string check_result(const DeviceReport& d) {
  const SelfCheck& c = d.check;
  if (c.estimated) return c.incomplete + ".";
  if (!c.incomplete.empty())
    return "not possible: " + c.incomplete + ". The results below start from an estimated state.";
  std::string peak = sz(c.peak_recorded);
  if (c.ok()) {
    std::string events = c.events == 0
                             ? std::string("makes no segment event, as torch did")
                             : "makes the " + count_of(c.events, "recorded segment event") +
                                   " (each size, in order, for the same request)";
    std::string blocks = c.allocations == 1 ? std::string("puts its one allocation")
                                            : "puts all " + count_of(c.allocations, "allocation");
    return "the simulation under the recorded settings " + events + ", " + blocks +
           " at torch's addresses and peaks at torch's " + peak + " reserved.";
  }
  std::string s = "DIFFERS from the recording.";
  if (c.differs) {
    s += " The simulation under the recorded settings makes the first " + count_text(c.matching) +
         " of " + count_of(c.events, "recorded segment event") + "; then torch made " +
         (c.recorded_missing ? std::string("no more") : event(c.recorded)) + ", the simulation " +
         (c.simulated_missing ? std::string("no more") : event(c.simulated)) + ".";
  }
  if (c.peak_simulated != c.peak_recorded)
    s += " Its peak reserved is " + sz(c.peak_simulated) + ", torch's " + peak + " (" +
         change(c.peak_simulated, c.peak_recorded) + ").";
  if (c.misplaced)
    s += " " + count_text(c.misplaced) + " of " + count_of(c.allocations, "block") +
         " went elsewhere than torch put them.";
  if (c.ooms_recorded != c.ooms_simulated)
    s += " It runs out of memory at " +
         count_of(static_cast<int64_t>(c.ooms_simulated.size()), "request") + ", torch at " +
         count_text(static_cast<int64_t>(c.ooms_recorded.size())) + ".";
  return s + " The results below may be off by as much.";
}

std::string memory_text(const simulate::Device& m) {
  std::vector<std::string> parts;
  if (m.limit >= 0) {
    if (m.limit_inferred)
      parts.push_back(
          "a memory cap between " + between(m.limit, m.limit_high + 1) +
          ", inferred from the recorded OOM and simulated at both ends (--memory-fraction "
          "F with --device-memory SIZE give the exact one)");
    else
      parts.push_back("a memory cap of " + sz(m.limit));
  }
  if (m.capacity >= 0) parts.push_back(sz(m.capacity) + " for the allocator on the device");
  if (m.total > 0) parts.push_back("device memory " + sz(m.total));
  if (parts.empty()) return "no limit known: a simulated request never fails for want of memory";
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

std::string oom_cell(const DeviceReport& d, const simulate::Result& r) {
  if (r.stopped_at >= 0) return "new OOM at entry " + count_text(r.stopped_at);
  if (d.recorded_ooms.empty()) return "none";
  size_t k = 0;
  for (int32_t e : d.recorded_ooms)
    k += std::find(r.avoided.begin(), r.avoided.end(), e) != r.avoided.end();
  if (k == d.recorded_ooms.size()) {
    std::string cell = d.recorded_ooms.size() == 1 ? "avoided" : "all avoided";
    if (d.truncation.ends_at_oom < 0) return cell;
    // Nothing after it was recorded: at most postponed.
    return cell + " (recording ends there)";
  }
  if (k == 0) return "still happens";
  return "avoided " + count_text(static_cast<int64_t>(k)) + " of " +
         count_text(static_cast<int64_t>(d.recorded_ooms.size()));
}

// "about 120 entries" / "about 3 steps".
std::string later(const Truncation& t, int64_t n) {
  return "about " + (t.by_steps ? count_of(n, "step") : count_of(n, "entry", "entries"));
}

// With an inferred cap: the outcome at both ends of its range when they differ.
std::string oom_cell(const DeviceReport& d, const Outcome& o) {
  if (int64_t k = postponed_by(d, o); k >= 0) return "postponed " + later(d.truncation, k);
  std::string low = oom_cell(d, o.result);
  if (!o.at_cap_high) return low;
  std::string high = oom_cell(d, *o.at_cap_high);
  if (high == low) return low;
  return low + "; cap " + cap_high(o.alt.device) + ": " + high;
}

// Why a prediction from a history with no cudaMalloc address is less sure
// (docs/whatif.md, "How close the predictions are").
// `placed`: how many segments the model placed (< 0: not said).
std::string layout_caveat(int64_t placed) {
  return "the recording holds no cudaMalloc address (no segment of it came from cudaMalloc, as "
         "when it is recorded with expandable segments): " +
         (placed >= 0 ? count_of(placed, "segment") + (placed == 1 ? " sits" : " sit")
                      : std::string("segments sit")) +
         " where the model of the driver puts them, with none of the driver's own allocations "
         "between them. Best fit breaks ties between equal free blocks by address, so where CUDA "
         "loads kernels lazily (its default) and places them among the first segments, the real "
         "peak can differ by a few percent (one measured workload: 2.8% more; 0% with "
         "CUDA_MODULE_LOADING=EAGER).";
}

// What a --set asked for, as it acts: over the recorded settings, or from
// torch's defaults when it starts with "defaults".
std::string outcome_label(const std::string& label) {
  if (label == "defaults") return "torch's defaults (in place of the recorded settings)";
  if (label.starts_with("defaults,")) return label + " (over torch's defaults)";
  return label + " (over the recorded settings)";
}

// When reserved memory peaked.
std::string peak_moment(int32_t event) {
  return event < 0 ? std::string("before the first trace entry")
                   : "after trace entry " + count_text(event);
}

// What a peak covers where the history ends at an OOM.
std::string recorded_part(const DeviceReport& d) {
  if (d.truncation.ends_at_oom < 0) return "";
  return "; of the recorded part only, up to trace entry " + count_text(d.truncation.ends_at_oom) +
         ", where the recording ends";
}

// How allocated memory went toward the OOM the history ends at.
std::string growth_text(const Truncation& t) {
  std::string over =
      t.by_steps ? count_of(t.window, "step") : count_of(t.window, "entry", "entries");
  if (t.window <= 0) return "";
  if (t.growth <= 0) return "Allocated memory did not grow over the " + over + " before it.";
  return "Allocated memory grew " + sz(t.growth) + " over " + over + " before it" +
         (t.steady ? ", steadily." : ", unevenly.");
}

// The recorded OOM the history ends at, avoided: the job would have gone on.
std::string avoided_at_end(const DeviceReport& d, const Outcome& o) {
  const Truncation& t = d.truncation;
  std::string s =
      "is avoided: the request fits, but the recording ends there, so what the job "
      "did next is not simulated. " +
      growth_text(t);
  if (int64_t k = postponed_by(d, o); k >= 0)
    s += " At that pace the memory left under the cap lasts " + later(t, k) +
         ": the setting postpones the OOM rather than saves the job.";
  return s;
}

// Blocks live when the trace began whose segments the snapshot does not
// record: allocated, yet in no reserved memory the simulation knows of, so
// unused memory is counted without them (it read negative: "-10.0MiB").
std::string outside_text(int64_t outside) {
  if (outside <= 0) return "";
  return ". Besides, " + sz(outside) +
         " was allocated then in blocks live when the trace began, in segments the snapshot "
         "does not record (made before recording began or dropped when the buffer wrapped): "
         "counted as allocated, not as reserved.";
}

std::string outcome_text(const DeviceReport& d, const Outcome& o) {
  const simulate::Result& r = o.result;
  std::string out = "  with " + outcome_label(o.alt.label) + ":\n";
  out += hang("    peak reserved   ",
              sz(r.peak.reserved) + ", " + peak_moment(r.peak_reserved_event) +
                  " (recorded settings " + sz(baseline(d)) + ", " +
                  change(r.peak.reserved, baseline(d)) + ")" + recorded_part(d));
  out += "    peak allocated  " + sz(r.peak.allocated) + '\n';
  out += hang("    at the peak     ", sz(r.unused_at_peak) + " reserved but not allocated (" +
                                          percent(r.unused_at_peak, r.peak.reserved) +
                                          "), largest free block " + sz(r.largest_free_at_peak) +
                                          outside_text(r.outside_at_peak));
  out += "    segments        " + count_text(r.segments_created) +
         " created or grown (segment_alloc and segment_map events)\n";
  if (o.alt.device.limit != d.memory.limit && o.alt.device.limit >= 0)
    out += "    memory cap      " + sz(o.alt.device.limit) + '\n';
  std::string oom;
  if (r.stopped_at >= 0) {
    const simulate::Oom& o2 = r.ooms.back();
    oom = "a new OOM at trace entry " + count_text(r.stopped_at) + ": a " + sz(o2.requested) +
          " request fails with " + sz(o2.reserved) + " reserved (" + sz(o2.free.bytes) +
          " of it free, largest free block " +
          sz(std::max(o2.free.largest_small, o2.free.largest_large)) + ") under " +
          (o2.cap ? "the memory cap" : "the device's memory") +
          "; the job would have stopped there.";
  }
  for (size_t i = 0; i < d.recorded_ooms.size(); ++i) {
    int32_t e = d.recorded_ooms[i];
    if (r.stopped_at >= 0 && r.stopped_at < e) break;
    bool first = oom.empty();
    if (!first) oom += ' ';
    oom += std::string(first ? "the" : "The") + " recorded OOM at trace entry " + count_text(e) +
           " (" + sz(d.recorded_oom_sizes[i]) + ") " +
           (avoids(o, e) && e == d.truncation.ends_at_oom ? avoided_at_end(d, o)
            : avoids(o, e)                                ? "is avoided: the request fits."
            : avoids(o, e, true) ? "is avoided only if the cap was near the top of what the "
                                   "recording allows (" +
                                       cap_high(o.alt.device) + "); with " +
                                       sz(o.alt.device.limit) + " it still happens."
                                 : "still happens.");
  }
  if (oom.empty()) oom = "none";
  out += hang("    OOM             ", oom);
  if (o.at_cap_high) {
    const simulate::Result& h = *o.at_cap_high;
    std::string low = oom_cell(d, r), high = oom_cell(d, h);
    if (low != high || h.peak.reserved != r.peak.reserved)
      out += hang("    cap " + cap_high(o.alt.device) +
                      std::string(12 - std::min<size_t>(12, cap_high(o.alt.device).size()), ' '),
                  "with the highest cap the recording allows: peak reserved " +
                      sz(h.peak.reserved) + ", OOM: " + high);
  }
  if (r.segments_placed_unanchored > 0)
    out += hang("    addresses       ", layout_caveat(r.segments_placed_unanchored));
  if (!o.alt.note.empty()) out += "    note            " + o.alt.note + '\n';
  return out;
}

std::string table_text(const DeviceReport& d) {
  std::string out;
  char line[256];
  std::string oom_head = d.recorded_ooms.empty()
                             ? "OOM"
                             : "OOM at entry " + count_text(d.recorded_ooms.front()) +
                                   (d.recorded_ooms.size() > 1 ? "..." : "");
  std::snprintf(line, sizeof line, "  %-34s %13s %11s %17s   %s\n", "settings", "peak reserved",
                "vs recorded", "unused at peak", oom_head.c_str());
  out += line;
  std::vector<std::string> notes;
  for (const Outcome& o : d.outcomes) {
    const simulate::Result& r = o.result;
    std::string unused = sz(r.unused_at_peak) + " " + percent(r.unused_at_peak, r.peak.reserved);
    std::string label = o.alt.label;
    if (!o.alt.note.empty()) {
      notes.push_back(o.alt.label + ": " + o.alt.note);
      label += " *";
    }
    std::snprintf(line, sizeof line, "  %-34s %13s %11s %17s   %s\n", label.c_str(),
                  sz(r.peak.reserved).c_str(),
                  o.alt.recorded ? "-" : change(r.peak.reserved, baseline(d)).c_str(),
                  unused.c_str(), oom_cell(d, o).c_str());
    out += line;
  }
  for (const std::string& n : notes) out += hang("  * ", n);
  auto outside = std::max_element(d.outcomes.begin(), d.outcomes.end(),
                                  [](const Outcome& x, const Outcome& y) {
                                    return x.result.outside_at_peak < y.result.outside_at_peak;
                                  });
  if (outside != d.outcomes.end() && outside->result.outside_at_peak > 0)
    out += hang("  unused at peak: ", "of the segments the snapshot records" +
                                          outside_text(outside->result.outside_at_peak));
  if (std::any_of(d.outcomes.begin(), d.outcomes.end(),
                  [](const Outcome& o) { return o.result.segments_placed_unanchored > 0; }))
    out += hang("  addresses: ", "settings without expandable segments: " + layout_caveat(-1));
  return out;
}

// A history that made none of the memory it shows.
std::string state_only_text(const DeviceReport& d) {
  return (d.entries == 1 ? std::string("the one trace entry is an allocation")
                         : "the " + count_text(static_cast<int64_t>(d.entries)) +
                               " trace entries are allocations") +
         ", with no segment made and nothing freed: all " + sz(d.start_reserved) + " reserved (" +
         count_of(static_cast<int64_t>(d.start_segments), "segment") +
         ") was reserved before recording began. What-if replays the requests that reserve "
         "memory under other settings, so it needs them recorded: call "
         "memsight.torch.record() (or torch.cuda.memory._record_memory_history()) before the "
         "model is built, run, then dump the snapshot.";
}

// One device's text after its heading.
std::string device_text(const DeviceReport& d, bool table) {
  std::string out =
      " - " + count_of(d.entries, "trace entry", "trace entries") + "; recorded settings: " +
      (d.recorded_conf.empty() ? std::string("torch's defaults") : d.recorded_conf) + '\n';
  for (const std::string& why : d.ignored_settings)
    out += hang("  ignored     ", "the recorded " + why + "; simulated with torch's default");
  if (d.state_only) return out + hang("  no history  ", state_only_text(d)) + '\n';
  out += hang("  self-check  ", check_text(d));
  out += hang("  memory      ", memory_text(d.memory));
  for (size_t i = 0; i < d.recorded_ooms.size(); ++i)
    out += "  recorded OOM at trace entry " + count_text(d.recorded_ooms[i]) + ": " +
           sz(d.recorded_oom_sizes[i]) + " requested\n";
  if (const Truncation& t = d.truncation; t.ends_at_oom >= 0)
    out += hang("  history     ",
                "ends at the recorded OOM (trace entry " + count_text(t.ends_at_oom) +
                    "): every prediction is for the recorded part, up to trace entry " +
                    count_text(t.ends_at_oom) +
                    ", where the recording ends; the job's later requests are not recorded. " +
                    growth_text(t));
  out += '\n';
  if (table)
    out += table_text(d);
  else
    for (const Outcome& o : d.outcomes)
      if (!o.alt.recorded) out += outcome_text(d, o);
  out += '\n';
  return out;
}

}  // namespace

std::string text(const Report& r) {
  if (r.devices.empty())
    return "The snapshot has no allocation history to simulate: what-if needs the requests "
           "recorded (memsight.torch.record() or torch.cuda.memory._record_memory_history() "
           "before the work, then dump the snapshot).\n";
  std::string out;
  for (size_t i = 0; i < r.devices.size(); ++i) {
    const DeviceReport& d = r.devices[i];
    out += (i < r.members.size() ? devices_heading(d.device, r.members[i])
                                 : "Device " + std::to_string(d.device)) +
           device_text(d, r.table);
  }
  return out;
}

}  // namespace memsight::whatif

namespace memsight::whatif {

std::pair<std::string, std::string> size_range(int64_t lo, int64_t hi) {
  for (double next_at = 1023.95;; next_at *= 1024) {
    std::string a = binary_size(static_cast<double>(lo), next_at);
    std::string b = binary_size(static_cast<double>(hi), next_at);
    if (a != b || next_at > 1e18) return {a, b};
  }
}

}  // namespace memsight::whatif

namespace memsight {

int64_t parse_device_memory(const std::string& text, const std::string& what) {
  uint64_t bytes = 0;
  if (!parse_size(text, bytes) || bytes > static_cast<uint64_t>(INT64_MAX))
    throw Error(what + " needs a size such as 80G, got '" + text + "'");
  if (bytes < (uint64_t{1} << 20))
    throw Error(what + " " + text + " is " + count_of(static_cast<int64_t>(bytes), "byte") +
                ", less than any GPU has: give its unit, such as " + text + "G");
  return static_cast<int64_t>(bytes);
}

double check_memory_fraction(double fraction, const std::string& typed, const std::string& what) {
  if (!(fraction > 0 && fraction <= 1))
    throw Error(what + " " + typed + ": a memory fraction is in (0.0, 1.0]");
  return fraction;
}

double parse_memory_fraction(const std::string& text, const std::string& what) {
  double v = 0;
  if (!parse_double(text, v) || !std::isfinite(v))
    throw Error(what + " needs a number in (0.0, 1.0] such as 0.5, got '" + text + "'");
  return check_memory_fraction(v, text, what);
}

std::pair<std::string, std::string> whatif_text_and_json(const Snapshot& snap,
                                                         const WhatifRequest& req) {
  whatif::Options opts;
  opts.set = req.set;
  opts.device_memory = req.device_memory;
  if (req.device_memory != -1 && req.device_memory <= 0)
    throw Error("the device's memory must be a positive number of bytes");
  if (req.memory_fraction != 0) {
    // The CLI's rule for --memory-fraction, on the exact value.
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", req.memory_fraction);
    opts.memory_fraction = check_memory_fraction(req.memory_fraction, buf, "memory_fraction");
  }
  whatif::Report r = whatif::run(snap, opts);
  return {whatif::text(r), whatif::json(r)};
}

}  // namespace memsight
