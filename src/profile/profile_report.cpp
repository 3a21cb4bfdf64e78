// profile_text / profile_json: the per-step report of `memsight profile`.
#include <cstdio>

#include "memsight/profile.h"
#include "memsight/text_tools.h"
#include "util/escape.h"

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

std::string dbl(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

void json_ops(std::string& out, const std::vector<OpBytes>& rows) {
  out += '[';
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += "{\"op\":";
    append_json_string(out, rows[i].op);
    out += ",\"site\":";
    append_json_string(out, rows[i].site);
    out += ",\"stack\":";
    append_json_string(out, rows[i].stack);
    out += ",\"bytes\":" + num(rows[i].bytes) + ",\"count\":" + num(rows[i].count) + "}";
  }
  out += ']';
}

void json_times(std::string& out, const std::vector<NameTime>& rows) {
  out += '[';
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += "{\"name\":";
    append_json_string(out, rows[i].name);
    out += ",\"total_us\":" + dbl(rows[i].total_us) + ",\"count\":" + num(rows[i].count) + "}";
  }
  out += ']';
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
  std::string out = "{\"events\":" + num(r.events) +
                    ",\"has_memory\":" + (r.has_memory ? "true" : "false") +
                    ",\"has_stacks\":" + (r.has_stacks ? "true" : "false") +
                    ",\"input_notes\":" + r.notes.json() + ",\"steps\":[";
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const ProfileStep& s = r.steps[i];
    if (i) out += ',';
    out += "{\"step\":" + (s.step < 0 ? std::string("null") : num(s.step)) +
           ",\"occurrence\":" + num(s.occurrence) + ",\"occurrences\":" + num(s.occurrences) +
           ",\"ts_us\":" + dbl(s.ts) + ",\"dur_us\":" + dbl(s.dur) + ",\"devices\":{";
    for (size_t k = 0; k < s.devices.size(); ++k) {
      const StepDevice& d = s.devices[k];
      if (k) out += ',';
      out += "\"cuda:" + num(d.device) + "\":{\"peak_allocated\":" + num(d.peak_allocated) +
             ",\"peak_reserved\":" + num(d.peak_reserved) + ",\"peak_ts_us\":" + dbl(d.peak_ts) +
             ",\"allocs\":" + num(d.allocs) + ",\"alloc_bytes\":" + num(d.alloc_bytes) +
             ",\"frees\":" + num(d.frees) + ",\"free_bytes\":" + num(d.free_bytes) +
             ",\"live_at_peak\":";
      json_ops(out, d.live_at_peak);
      out += ",\"allocated_most\":";
      json_ops(out, d.allocated_most);
      out += '}';
    }
    out += "},\"top_ops\":";
    json_times(out, s.top_ops);
    out += ",\"top_kernels\":";
    json_times(out, s.top_kernels);
    out += '}';
  }
  out += "]}\n";
  return out;
}

}  // namespace memsight
