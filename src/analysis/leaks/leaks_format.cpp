// leaks_text / leaks_json (memsight/leaks.h). Events are trace entry
// indices within the device's trace, as everywhere else.
#include "analysis/leaks/leaks_format.h"

#include <cstdio>

#include "analysis/frames/report_text.h"
#include "analysis/leaks/leak_holders.h"
#include "util/json_writer.h"
#include "util/lines.h"
#include "util/text_format.h"

namespace memsight {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

std::string source_text(const FrameClassifier& fc, const Iterations& it) {
  const int64_t n = static_cast<int64_t>(it.starts.size());
  auto steps = [&] {
    return it.numbers.empty()
               ? std::string()
               : ", steps " + num(it.numbers.front()) + " to " + num(it.numbers.back());
  };
  if (it.source == "memsight steps")
    return count_of(n, "step") + " marked by memsight.torch.mark_step()" + steps();
  if (it.source == "profiler steps")
    return count_of(n, "torch.profiler step") + " (ProfilerStep#N)" + steps();
  if (it.source == "optimizer steps")
    return count_of(n, "optimizer step") + " (torch's Optimizer.step annotations)";
  if (it.source == "repeating allocations") {
    char every[64];
    std::snprintf(every, sizeof every, "%.0f", it.period);
    return count_of(n, "iteration") + " of a repeating pattern: the allocation at " +
           fc.site_label(it.marker) + " recurs every ~" + every + " allocations";
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
  out += devices_heading(r.device, devices) + " - " +
         count_of(static_cast<int64_t>(r.entries), "trace entry", "trace entries") + "; " +
         source_text(fc, r.iterations) + '\n';
  if (r.verdict != LeakVerdict::Leak) {
    out += wrap_words(r.message, "  ");
    if (r.verdict == LeakVerdict::None)
      out += wrap_words(
          "Memory made once and kept (weights, optimizer state, a cache that fills up and then "
          "stays) and memory one iteration keeps for the next are not leaks.",
          "  ");
  } else {
    out +=
        wrap_words("LEAK: " + format_bytes(r.bytes_per_iteration) +
                       " more stays allocated after each iteration: allocations made in the " +
                       count_of(r.measured, "iteration") +
                       " checked that are still live at the end of the trace, from "
                       "every part of the run. By allocation site (innermost frame of your code):",
                   "  ");
    char line[160];
    for (const LeakSite& s : r.sites) {
      std::snprintf(line, sizeof line, "    %10s/iteration  in %s of %s  %s\n",
                    format_bytes(s.bytes_per_iteration).c_str(),
                    count_text(s.iterations_grown).c_str(),
                    count_of(r.measured, "iteration").c_str(), kind_text(s).c_str());
      out += line;
      out += "        " + fc.describe(s.stack, 4) + '\n';
      out += "        " + count_text(s.surviving_count) + " still live (" +
             format_bytes(s.surviving_bytes) + "); the newest made at trace entr" +
             (s.newest.size() == 1 ? "y " : "ies ");
      for (size_t i = 0; i < s.newest.size(); ++i)
        out += (i ? ", " : "") + count_text(s.newest[i].event) + " (" +
               step_name(r.iterations, static_cast<size_t>(s.newest[i].iteration)) + ")";
      out += '\n';
      if (std::string held = held_by_text(s, r.iterations); !held.empty())
        out += wrap_words(held, "        ");
    }
    out += wrap_words("Allocated at: " + fc.describe(r.alloc_stack, 3) + ". " + r.advice, "  ");
    if (std::string holder = holder_fix_text(r); !holder.empty()) out += wrap_words(holder, "  ");
  }
  if (!r.growth.empty() && r.growth[0].live.size() >= 2) {
    const auto& live = r.growth[0].live;
    const Iterations& it = r.iterations;
    size_t mid = live.size() / 2, last = live.size() - 1;
    out += "  allocated at the start of " + step_name(it, 0) + ": " + format_bytes(live[0]) + ", " +
           step_name(it, mid) + ": " + format_bytes(live[mid]) + ", " + step_name(it, last) + ": " +
           format_bytes(live[last]) + '\n';
  }
}

// "stack":"a.py:1:f <- ...","frames":[...]
void stack_json(JsonWriter& w, const FrameClassifier& fc, StackId stack) {
  w.field("stack", fc.describe(stack)).key("frames");
  json_stack(w, fc, stack);
}

void json_series(JsonWriter& w, const std::vector<int64_t>& v) {
  w.begin_array();
  for (int64_t x : v) w.value(x);
  w.end_array();
}

void iterations_json(JsonWriter& w, const FrameClassifier& fc, const Iterations& it) {
  w.begin_object()
      .field("source", it.source)
      .field("description", source_text(fc, it))
      .field("count", it.starts.size())
      .field("complete", it.complete())
      .key("starts");
  json_series(w, it.starts);
  w.key("numbers");
  json_series(w, it.numbers);
  w.end_object();
}

void leak_site_json(JsonWriter& w, const FrameClassifier& fc, const LeakSite& s) {
  w.begin_object()
      .field("site", s.site)
      .field("site_kind", frame_kind_name(s.kind))
      .field("bytes_per_iteration", s.bytes_per_iteration)
      .field("iterations_grown", s.iterations_grown)
      .field("surviving_bytes", s.surviving_bytes)
      .field("surviving_count", s.surviving_count)
      .field("category", category_key(s.category))
      .field("module", s.module)
      .field("made_in", s.made_in);
  stack_json(w, fc, s.stack);
  w.key("newest").begin_array();
  for (const Survivor& v : s.newest)
    w.begin_object()
        .field("event", v.event)
        .field("iteration", v.iteration)
        .field("bytes", v.bytes)
        .field("requested", v.requested)
        .field("stack", fc.describe(v.stack))
        .end_object();
  w.end_array();
  held_by_json(w, s);
  w.end_object();
}

}  // namespace

void leak_device_json(JsonWriter& w, const FrameClassifier& fc, const LeakReport& r,
                      const DeviceRanges* alike) {
  w.begin_object()
      .field("device", r.device)
      .field("entries", r.entries)
      .field("verdict", leak_verdict_name(r.verdict))
      .field("message", r.message)
      .key("iterations");
  iterations_json(w, fc, r.iterations);
  w.field("measured", r.measured)
      .field("bytes_per_iteration", r.bytes_per_iteration)
      .key("sites")
      .begin_array();
  for (const LeakSite& s : r.sites) leak_site_json(w, fc, s);
  w.end_array().key("allocated_at");
  if (r.alloc_site.empty()) {
    w.null();
  } else {
    w.begin_object().field("site", r.alloc_site);
    stack_json(w, fc, r.alloc_stack);
    w.end_object();
  }
  w.field("advice", r.advice);
  w.key("growth").begin_array();
  for (const auto& g : r.growth) {
    w.begin_object().field("site", g.site).field("leak", g.leak).key("live");
    json_series(w, g.live);
    w.end_object();
  }
  w.end_array();
  if (alike) append_alike_json(w, *alike);
  w.end_object();
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
  std::string out;
  JsonWriter w(out);
  w.begin_document().key("user_code");
  json_strings(w, leaks.user_code);
  w.field("min_iterations", kMinLeakIterations).key("devices").begin_array();
  for (size_t i = 0; i < leaks.devices.size(); ++i) {
    const DeviceRanges& m = leaks.members[i];
    leak_device_json(w, fc, leaks.devices[i], several(m) ? &m : nullptr);
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

}  // namespace memsight
