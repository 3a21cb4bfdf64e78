// profile_text / profile_json: the per-step report of `memsight profile`.
#include <cstdio>

#include "memsight/profile.h"
#include "util/json_writer.h"
#include "util/text_format.h"

namespace memsight {
namespace {

std::string ms(double us) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", us / 1000.0);
  return b;
}

std::string device_name(const ProfileReport& r, int d) {
  std::string s = "cuda:" + std::to_string(d);
  if (d >= 0 && static_cast<size_t>(d) < r.device_names.size() && !r.device_names[d].empty())
    s += " (" + r.device_names[d] + ")";
  return s;
}

std::string step_title(const ProfileStep& s) {
  if (s.step < 0) return "Whole trace (no ProfilerStep#N annotations)";
  std::string n = std::to_string(s.step);
  std::string out = "Step " + n + " (ProfilerStep#" + n;
  if (s.occurrences > 1)
    out += ", occurrence " + std::to_string(s.occurrence) + " of " + std::to_string(s.occurrences);
  return out + ")";
}

void op_rows(std::string& out, const std::vector<OpBytes>& rows) {
  for (const OpBytes& o : rows) {
    char b[48];
    if (o.count)
      std::snprintf(b, sizeof b, "      %10s %6s x  ", format_bytes(o.bytes).c_str(),
                    count_text(o.count).c_str());
    else  // a remainder, not allocations the trace saw
      std::snprintf(b, sizeof b, "      %10s           ", format_bytes(o.bytes).c_str());
    out += b + o.op;
    if (!o.stack.empty()) out += "  <- " + o.stack;
    out += '\n';
  }
}

void time_rows(std::string& out, const std::vector<NameTime>& rows) {
  for (const NameTime& n : rows) {
    char b[64];
    std::snprintf(b, sizeof b, "      %12s %7s x  ", ms(n.total_us).c_str(),
                  count_text(n.count).c_str());
    out += b + cut_name(n.name, 120) + '\n';  // kernel names run long: one line each
  }
}

// Times in microseconds to the nanosecond.
constexpr int kUsDecimals = 3;

void json_ops(JsonWriter& w, const std::vector<OpBytes>& rows) {
  w.begin_array();
  for (const OpBytes& o : rows)
    w.begin_object()
        .field("op", o.op)
        .field("site", o.site)
        .field("stack", o.stack)
        .field("bytes", o.bytes)
        .field("count", o.count)
        .end_object();
  w.end_array();
}

void json_times(JsonWriter& w, const std::vector<NameTime>& rows) {
  w.begin_array();
  for (const NameTime& n : rows)
    w.begin_object()
        .field("name", n.name)
        .fixed_field("total_us", n.total_us, kUsDecimals)
        .field("count", n.count)
        .end_object();
  w.end_array();
}

void json_step_device(JsonWriter& w, const StepDevice& d) {
  w.key("cuda:" + std::to_string(d.device))
      .begin_object()
      .field("peak_allocated", d.peak_allocated)
      .field("peak_reserved", d.peak_reserved)
      .fixed_field("peak_ts_us", d.peak_ts, kUsDecimals)
      .field("allocs", d.allocs)
      .field("alloc_bytes", d.alloc_bytes)
      .field("frees", d.frees)
      .field("free_bytes", d.free_bytes)
      .key("live_at_peak");
  json_ops(w, d.live_at_peak);
  w.key("allocated_most");
  json_ops(w, d.allocated_most);
  w.end_object();
}

}  // namespace

std::string profile_text(const ProfileReport& r) {
  std::string out = "torch.profiler trace: " + count_of(r.events, "event") + ", " +
                    count_of(static_cast<int64_t>(r.steps.size()), "step") + "\n";
  out += r.notes.text("  input: ");
  if (!r.has_memory)
    out += "  no [memory] events: record with profile_memory=True to see memory per step\n";
  if (!r.has_stacks)
    out += "  no Python stacks: record with with_stack=True to see where ops were called\n";
  for (const ProfileStep& s : r.steps) {
    out += '\n' + step_title(s) + ": " + ms(s.dur) + "\n";
    for (const StepDevice& d : s.devices) {
      out += "  " + device_name(r, d.device) + ": peak allocated " +
             format_bytes(d.peak_allocated) + ", peak reserved " + format_bytes(d.peak_reserved) +
             "; " + count_of(d.allocs, "allocation") + " (" + format_bytes(d.alloc_bytes) + "), " +
             count_of(d.frees, "free") + " (" + format_bytes(d.free_bytes) + ")\n";
      if (!d.live_at_peak.empty()) {
        out += "    live at the peak, by the op that allocated it:\n";
        op_rows(out, d.live_at_peak);
      }
      if (!d.allocated_most.empty()) {
        out += "    allocated most during the step:\n";
        op_rows(out, d.allocated_most);
      }
    }
    if (!s.top_ops.empty()) {
      out += "  ops by CPU time (inclusive of the ops they call):\n";
      time_rows(out, s.top_ops);
    }
    if (!s.top_kernels.empty()) {
      out += "  kernels by GPU time:\n";
      time_rows(out, s.top_kernels);
    }
  }
  return out;
}

std::string profile_json(const ProfileReport& r) {
  std::string out;
  JsonWriter w(out);
  w.begin_document()
      .field("events", r.events)
      .field("has_memory", r.has_memory)
      .field("has_stacks", r.has_stacks)
      .key("input_notes");
  r.notes.json(w);
  w.key("steps").begin_array();
  for (const ProfileStep& s : r.steps) {
    w.begin_object().key("step");
    if (s.step < 0)
      w.null();
    else
      w.value(s.step);
    w.field("occurrence", s.occurrence)
        .field("occurrences", s.occurrences)
        .fixed_field("ts_us", s.ts, kUsDecimals)
        .fixed_field("dur_us", s.dur, kUsDecimals)
        .key("devices")
        .begin_object();
    for (const StepDevice& d : s.devices) json_step_device(w, d);
    w.end_object().key("top_ops");
    json_times(w, s.top_ops);
    w.key("top_kernels");
    json_times(w, s.top_kernels);
    w.end_object();
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

}  // namespace memsight
