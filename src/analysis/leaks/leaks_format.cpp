// leaks_text / leaks_json (memsight/leaks.h). Events are trace entry
// indices within the device's trace, as everywhere else.
#include "analysis/leaks/leaks_format.h"

#include <cstdio>

#include "analysis/frames/report_text.h"
#include "util/escape.h"
#include "util/lines.h"

namespace memsight {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

// "1,234"
std::string count_text(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string source_text(const FrameClassifier& fc, const Iterations& it) {
  const std::string n = count_text(static_cast<int64_t>(it.starts.size()));
  auto steps = [&] {
    return it.numbers.empty()
               ? std::string()
               : ", steps " + num(it.numbers.front()) + " to " + num(it.numbers.back());
  };
  if (it.source == "memsight steps")
    return n + " steps marked by memsight.torch.mark_step()" + steps();
  if (it.source == "profiler steps") return n + " torch.profiler steps (ProfilerStep#N)" + steps();
  if (it.source == "optimizer steps")
    return n + " optimizer steps (torch's Optimizer.step annotations)";
  if (it.source == "repeating allocations") {
    char every[64];
    std::snprintf(every, sizeof every, "%.0f", it.period);
    return n + " iterations of a repeating pattern: the allocation at " + fc.site_label(it.marker) +
           " recurs every ~" + every + " allocations";
  }
  return "no iterations";
}

std::string step_name(const Iterations& it, size_t i) {
  return it.source == "repeating allocations" || it.source == "optimizer steps"
             ? "iteration " + num(static_cast<int64_t>(i))
             : "step " + num(it.numbers[i]);
}

// "unknown, made in the forward of layers.3"
std::string kind_text(const LeakSite& s) {
  std::string k(category_name(s.category));
  if (s.made_in.empty()) return s.module.empty() ? k : k + " (" + s.module + ")";
  std::string made = s.made_in.starts_with("outside") ? s.made_in : "in the " + s.made_in;
  return k + ", made " + made + (s.module.empty() ? "" : " of " + s.module);
}

void device_text(std::string& out, const FrameClassifier& fc, const LeakReport& r,
                 const DeviceRanges& devices) {
  out += devices_heading(r.device, devices) + " - " + count_text(static_cast<int64_t>(r.entries)) +
         entries_word(static_cast<int64_t>(r.entries)) + "; " + source_text(fc, r.iterations) +
         '\n';
  if (r.verdict != LeakVerdict::Leak) {
    out += wrap_words(r.message, "  ");
    if (r.verdict == LeakVerdict::None)
      out += wrap_words(
          "Memory made once and kept (weights, optimizer state, a cache that fills up and then "
          "stays) and memory one iteration keeps for the next are not leaks.",
          "  ");
  } else {
    out +=
        wrap_words("LEAK: " + size_text(r.bytes_per_iteration) +
                       " more stays allocated after each iteration: allocations made in the " +
                       num(r.measured) +
                       " iterations checked that are still live at the end of the trace, from "
                       "every part of the run. By allocation site (innermost frame of your code):",
                   "  ");
    char line[160];
    for (const LeakSite& s : r.sites) {
      std::snprintf(line, sizeof line, "    %10s/iteration  in %lld of %lld iterations  %s\n",
                    size_text(s.bytes_per_iteration).c_str(),
                    static_cast<long long>(s.iterations_grown), static_cast<long long>(r.measured),
                    kind_text(s).c_str());
      out += line;
      out += "        " + fc.describe(s.stack, 4) + '\n';
      out += "        " + count_text(s.surviving_count) + " still live (" +
             size_text(s.surviving_bytes) + "); the newest made at trace entr" +
             (s.newest.size() == 1 ? "y " : "ies ");
      for (size_t i = 0; i < s.newest.size(); ++i)
        out += (i ? ", " : "") + count_text(s.newest[i].event) + " (" +
               step_name(r.iterations, static_cast<size_t>(s.newest[i].iteration)) + ")";
      out += '\n';
    }
    std::string fix = "The line to fix: " + fc.describe(r.fix_stack, 3) + ". ";
    fix += r.sites.size() > 1
               ? "In most iterations the newest surviving allocation is made there; what the "
                 "iteration made before it and kept is likely held through it (a tensor's "
                 "autograd graph holds the tensors it was computed from). "
               : "";
    fix +=
        "Look for where its result is kept past the iteration (a list, a dict, an attribute, a "
        "global): keep loss.item() or tensor.detach() instead of the tensor, or clear the "
        "container.";
    out += wrap_words(fix, "  ");
  }
  if (!r.growth.empty() && r.growth[0].live.size() >= 2) {
    const auto& live = r.growth[0].live;
    const Iterations& it = r.iterations;
    size_t mid = live.size() / 2, last = live.size() - 1;
    out += "  allocated at the start of " + step_name(it, 0) + ": " + size_text(live[0]) + ", " +
           step_name(it, mid) + ": " + size_text(live[mid]) + ", " + step_name(it, last) + ": " +
           size_text(live[last]) + '\n';
  }
}

// ,"stack":"a.py:1:f <- ...","frames":[...]
void stack_json(std::string& out, const FrameClassifier& fc, StackId stack) {
  out += ",\"stack\":";
  append_json_string(out, fc.describe(stack));
  out += ",\"frames\":";
  json_stack(out, fc, stack);
}

void json_series(std::string& out, const std::vector<int64_t>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += num(v[i]);
  }
  out += ']';
}

}  // namespace

void leak_device_json(std::string& out, const FrameClassifier& fc, const LeakReport& r,
                      const DeviceRanges* alike) {
  const Iterations& it = r.iterations;
  out += "{\"device\":" + num(r.device) + ",\"entries\":" + num(static_cast<int64_t>(r.entries)) +
         ",\"verdict\":";
  append_json_string(out, leak_verdict_name(r.verdict));
  out += ",\"message\":";
  append_json_string(out, r.message);
  out += ",\"iterations\":{\"source\":";
  append_json_string(out, it.source);
  out += ",\"description\":";
  append_json_string(out, source_text(fc, it));
  out += ",\"count\":" + num(static_cast<int64_t>(it.starts.size())) +
         ",\"complete\":" + num(static_cast<int64_t>(it.complete())) + ",\"starts\":";
  json_series(out, it.starts);
  out += ",\"numbers\":";
  json_series(out, it.numbers);
  out += "},\"measured\":" + num(r.measured) +
         ",\"bytes_per_iteration\":" + num(r.bytes_per_iteration) + ",\"sites\":[";
  for (size_t i = 0; i < r.sites.size(); ++i) {
    const LeakSite& s = r.sites[i];
    if (i) out += ',';
    out += "{\"site\":";
    append_json_string(out, s.site);
    out += ",\"site_kind\":\"";
    out += frame_kind_name(s.kind);
    out += "\",\"bytes_per_iteration\":" + num(s.bytes_per_iteration) +
           ",\"iterations_grown\":" + num(s.iterations_grown) +
           ",\"surviving_bytes\":" + num(s.surviving_bytes) +
           ",\"surviving_count\":" + num(s.surviving_count) + ",\"category\":\"";
    out += category_key(s.category);
    out += "\",\"module\":";
    append_json_string(out, s.module);
    out += ",\"made_in\":";
    append_json_string(out, s.made_in);
    stack_json(out, fc, s.stack);
    out += ",\"newest\":[";
    for (size_t k = 0; k < s.newest.size(); ++k) {
      const Survivor& v = s.newest[k];
      if (k) out += ',';
      out += "{\"event\":" + num(v.event) + ",\"iteration\":" + num(v.iteration) +
             ",\"bytes\":" + num(v.bytes) + ",\"requested\":" + num(v.requested) + ",\"stack\":";
      append_json_string(out, fc.describe(v.stack));
      out += '}';
    }
    out += "]}";
  }
  out += "],\"fix\":";
  if (r.fix_site.empty()) {
    out += "null";
  } else {
    out += "{\"site\":";
    append_json_string(out, r.fix_site);
    stack_json(out, fc, r.fix_stack);
    out += '}';
  }
  out += ",\"growth\":[";
  for (size_t i = 0; i < r.growth.size(); ++i) {
    if (i) out += ',';
    out += "{\"site\":";
    append_json_string(out, r.growth[i].site);
    out += std::string(",\"leak\":") + (r.growth[i].leak ? "true" : "false") + ",\"live\":";
    json_series(out, r.growth[i].live);
    out += '}';
  }
  out += ']';
  if (alike) append_alike_json(out, *alike);
  out += '}';
}

std::string leaks_text(const Snapshot& snap, const Leaks& leaks) {
  if (leaks.devices.empty())
    return "The snapshot has no segments and no trace: nothing to report.\n";
  FrameClassifier fc(snap, UserCode{leaks.user_code});
  std::string out;
  for (size_t i = 0; i < leaks.devices.size(); ++i) {
    if (i) out += '\n';
    device_text(out, fc, leaks.devices[i], leaks.members[i]);
  }
  return out;
}

std::string leaks_json(const Snapshot& snap, const Leaks& leaks) {
  FrameClassifier fc(snap, UserCode{leaks.user_code});
  std::string out = "{\"user_code\":";
  json_strings(out, leaks.user_code);
  out += ",\"min_iterations\":" + num(static_cast<int64_t>(kMinLeakIterations)) + ",\"devices\":[";
  for (size_t i = 0; i < leaks.devices.size(); ++i) {
    if (i) out += ',';
    const DeviceRanges& m = leaks.members[i];
    leak_device_json(out, fc, leaks.devices[i], several(m) ? &m : nullptr);
  }
  out += "]}\n";
  return out;
}

}  // namespace memsight
