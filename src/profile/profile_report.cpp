// profile_text / profile_json: the per-step report of `memsight profile`.
#include <cstdio>

#include "memsight/profile.h"
#include "memsight/text_tools.h"
#include "util/json_writer.h"

namespace memsight {
namespace {

std::string sz(int64_t v) { return format_bytes(static_cast<double>(v)); }

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
      std::snprintf(b, sizeof b, "      %10s %6lld x  ", sz(o.bytes).c_str(),
                    static_cast<long long>(o.count));
    else  // a remainder, not allocations the trace saw
      std::snprintf(b, sizeof b, "      %10s           ", sz(o.bytes).c_str());
    out += b + o.op;
    if (!o.stack.empty()) out += "  <- " + o.stack;
    out += '\n';
  }
}

void time_rows(std::string& out, const std::vector<NameTime>& rows) {
  for (const NameTime& n : rows) {
    char b[64];
    std::snprintf(b, sizeof b, "      %12s %7lld x  ", ms(n.total_us).c_str(),
                  static_cast<long long>(n.count));
    out += b + cut_name(n.name, 120) + '\n';  // kernel names run long: one line each
  }
}

std::string num(int64_t v) { return std::to_string(v); }

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
  w.key("cuda:" + num(d.device))
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
  std::string out = "torch.profiler trace: " + num(r.events) + " events, " +
                    num(static_cast<int64_t>(r.steps.size())) +
                    (r.steps.size() == 1 ? " step" : " steps") + "\n";
  out += r.notes.text("  input: ");
  if (!r.has_memory)
    out += "  no [memory] events: record with profile_memory=True to see memory per step\n";
  if (!r.has_stacks)
    out += "  no Python stacks: record with with_stack=True to see where ops were called\n";
  for (const ProfileStep& s : r.steps) {
    out += '\n' + step_title(s) + ": " + ms(s.dur) + "\n";
    for (const StepDevice& d : s.devices) {
      out += "  " + device_name(r, d.device) + ": peak allocated " + sz(d.peak_allocated) +
             ", peak reserved " + sz(d.peak_reserved) + "; " + num(d.allocs) + " allocations (" +
             sz(d.alloc_bytes) + "), " + num(d.frees) + " frees (" + sz(d.free_bytes) + ")\n";
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
