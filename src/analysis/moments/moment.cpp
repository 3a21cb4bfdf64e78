#include "analysis/moments/moment.h"

#include <algorithm>
#include <charconv>

#include "memsight/error.h"
#include "memsight/leaks.h"
#include "util/text_format.h"

namespace memsight {
namespace {

bool is_number(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

bool parse_int(std::string_view s, int64_t& v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

int64_t step_event(const Snapshot& snap, size_t device, std::string_view at) {
  std::string_view n = at.substr(5);
  int64_t step = 0;
  if (!is_number(n) || !parse_int(n, step))
    throw Error("'" + std::string(at) + "' is not a moment: use step:N (N a step number)");
  Iterations it = find_iterations(snap, device);
  if (it.starts.empty())
    throw Error("device " + std::to_string(device) +
                "'s trace has no iterations to name by step (no memsight.torch.mark_step(), "
                "profiler or optimizer step annotations, no repeating allocations)");
  auto pos = std::find(it.numbers.begin(), it.numbers.end(), step);
  if (pos == it.numbers.end()) {
    const std::string first = std::to_string(it.numbers.front());
    const std::string which =
        it.numbers.size() == 1 ? "is step " + first
                               : "are steps " + first + " to " + std::to_string(it.numbers.back());
    throw Error("device " + std::to_string(device) + " has no step " + std::string(n) + " (its " +
                count_of(static_cast<int64_t>(it.starts.size()), "iteration") + ", " + it.source +
                ", " + which + ")");
  }
  return it.starts[static_cast<size_t>(pos - it.numbers.begin())] - 1;
}

}  // namespace

size_t devices_named(const Snapshot& snap) {
  size_t n = snap.device_count();
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && s.device < (int64_t{1} << 20))
      n = std::max(n, static_cast<size_t>(s.device) + 1);
  return n;
}

std::string no_such_device(int64_t device, size_t named) {
  const std::string lists = named == 0   ? "no device at all (neither a trace nor a segment)"
                            : named == 1 ? "only device 0"
                                         : "devices 0 to " + std::to_string(named - 1);
  return "the snapshot has no device " + std::to_string(device) + ": it lists " + lists;
}

int64_t moment_event(const Snapshot& snap, size_t device, const replay::Result& rr,
                     std::string_view at) {
  auto [begin, end] =
      device < snap.device_count() ? snap.device_rows(device) : std::pair<uint32_t, uint32_t>{};
  const int64_t entries = end - begin;
  if (at == "peak") return rr.peak_allocated_event;
  if (at == "snapshot") return entries - 1;
  if (at.starts_with("step:")) return step_event(snap, device, at);
  if (at == "oom" || at.starts_with("oom:")) {
    int64_t k = 0;
    std::string_view n = at.substr(std::min<size_t>(at.size(), 4));
    if (at != "oom" && (!is_number(n) || !parse_int(n, k)))
      throw Error("'" + std::string(at) + "' is not a moment: use oom or oom:K (K from 0)");
    if (k >= static_cast<int64_t>(rr.ooms.size()))
      throw Error("device " + std::to_string(device) + " has " + std::to_string(rr.ooms.size()) +
                  " OOM" + (rr.ooms.size() == 1 ? "" : "s") + ", so there is no OOM " +
                  std::to_string(k));
    return rr.ooms[static_cast<size_t>(k)].event;
  }
  int64_t event = 0;
  if (!parse_int(at, event))
    throw Error("'" + std::string(at) +
                "' is not a moment: use peak, snapshot, oom, oom:K, step:N or a trace entry index");
  if (event < -1 || event >= entries)
    throw Error("trace entry " + std::string(at) + " is not in device " + std::to_string(device) +
                "'s trace (" +
                (entries ? "entries 0 to " + std::to_string(entries - 1) + ", or -1 for"
                         : "it has no entries: -1 is the state") +
                " before the first)");
  return event;
}

}  // namespace memsight
