// `memsight estimate`'s answer as text and JSON (estimate.h): per device the
// peaks, what of reserved memory sat unused at its peak, and whether the
// requests fit the device; then the what-if table of the same requests.
#include <string>

#include "analysis/estimate/estimate.h"
#include "util/json_writer.h"
#include "util/text_format.h"

namespace memsight::estimate {
namespace {

std::string sz(int64_t v) { return format_bytes(static_cast<double>(v)); }

// The bound the device puts on reserved memory: the cap, else what the
// allocator can get; -1: none known.
int64_t bound(const simulate::Device& m) {
  if (m.limit >= 0 && (m.capacity < 0 || m.limit < m.capacity)) return m.limit;
  return m.capacity;
}

std::string verdict(const DeviceRun& run) {
  const simulate::Result& r = run.result;
  if (r.stopped_at >= 0) {
    const simulate::Oom& o = r.ooms.back();
    std::string free = o.cap ? sz(std::max<int64_t>(0, run.memory.limit - o.reserved)) +
                                   " left under the cap of " + sz(run.memory.limit)
                             : sz(run.device_free) + " free on the device";
    return "RUNS OUT OF MEMORY at trace entry " + count_text(r.stopped_at) + " (entry " +
           count_text(run.oom_row) + " of the completed snapshot): it needs " + sz(o.requested) +
           " with " + free + " (reserved " + sz(o.reserved) + ", allocated " + sz(o.allocated) +
           ")";
  }
  const int64_t b = bound(run.memory);
  if (b < 0) return "no device memory given (--device-memory SIZE): nothing bounds it";
  return "fits: peak reserved " + sz(r.peak.reserved) + " of " + sz(b) + " (" +
         percent(static_cast<double>(r.peak.reserved), static_cast<double>(b)) + ")";
}

}  // namespace

std::string answer_text(const Answer& a) {
  std::string out = "estimate under " +
                    (a.settings.empty() ? std::string("torch's default settings") : a.settings) +
                    '\n';
  for (const DeviceRun* run : a.devices) {
    const simulate::Result& r = run->result;
    out += "device " + std::to_string(run->device) + " - " +
           count_of(static_cast<int64_t>(run->plan.trace.allocs), "allocation") + '\n';
    const std::string until = r.stopped_at >= 0 ? " (until it runs out)" : "";
    out += "  peak allocated   " + sz(r.peak.allocated) + until + '\n';
    out += "  peak reserved    " + sz(r.peak.reserved) + until + '\n';
    out += "  unused at peak   " + sz(r.unused_at_peak);
    if (r.peak.reserved > 0)
      out += " (" +
             percent(static_cast<double>(r.unused_at_peak), static_cast<double>(r.peak.reserved)) +
             " of reserved; largest free block " + sz(r.largest_free_at_peak) + ")";
    out += "\n  verdict          " + verdict(*run) + "\n";
  }
  out += "\nWhat if, the same requests under the standard settings:\n\n" + whatif::text(a.table);
  return out;
}

std::string answer_json(const Answer& a) {
  std::string out;
  JsonWriter w(out);
  w.begin_document().field("settings", a.settings).key("devices").begin_array();
  for (const DeviceRun* run : a.devices) {
    const simulate::Result& r = run->result;
    const simulate::Device& m = run->memory;
    w.begin_object()
        .field("device", static_cast<int64_t>(run->device))
        .field("allocations", static_cast<int64_t>(run->plan.trace.allocs))
        .field("peak_allocated", r.peak.allocated)
        .field("peak_reserved", r.peak.reserved)
        .field("unused_at_peak", r.unused_at_peak)
        .field("largest_free_at_peak", r.largest_free_at_peak)
        .key("device_memory");
    m.total > 0 ? w.value(m.total) : w.null();
    w.key("memory_limit");
    m.limit >= 0 ? w.value(m.limit) : w.null();
    w.key("fits");
    if (r.stopped_at >= 0)
      w.value(false);
    else if (bound(m) >= 0)
      w.value(true);
    else
      w.null();
    w.key("oom");
    if (r.stopped_at >= 0) {
      const simulate::Oom& o = r.ooms.back();
      w.begin_object()
          .field("entry", static_cast<int64_t>(r.stopped_at))
          .field("completed_entry", run->oom_row)
          .field("requested", o.requested)
          .field("device_free", run->device_free)
          .field("reserved", o.reserved)
          .field("allocated", o.allocated)
          .field("cap", o.cap)
          .end_object();
    } else {
      w.null();
    }
    w.end_object();
  }
  std::string table = whatif::json(a.table);
  while (!table.empty() && table.back() == '\n') table.pop_back();
  w.end_array().raw_field("whatif", table).end_object();
  out += '\n';
  return out;
}

}  // namespace memsight::estimate
