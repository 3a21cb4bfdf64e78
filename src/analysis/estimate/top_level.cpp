// The completed snapshot's top-level keys (estimate.h): what it was
// completed under, so that every command reads it as it was made (the
// replay of `summary` needs the settings, `whatif` the device too), and the
// tags moved with their storages to the simulated addresses.
#include <algorithm>
#include <cstdint>

#include "analysis/estimate/estimate.h"
#include "util/version.h"

namespace memsight::estimate {
namespace {

void set_top(Snapshot& out, const std::string& key, PyValue v) {
  for (auto& [k, old] : out.top_level)
    if (k == key) {
      old = std::move(v);
      return;
    }
  out.top_level.emplace_back(key, std::move(v));
  if (out.top_keys.empty()) out.top_keys = {"segments", "device_traces"};
  out.top_keys.push_back(key);
}

// torch's allocator_settings for these settings (the keys memsight reads,
// over whatever else the snapshot had there).
PyValue allocator_settings(const Snapshot& in, const alloc::Settings& s) {
  const PyValue* had = in.top("allocator_settings");
  PyValue st = had && had->kind == PyValue::Kind::Dict ? *had : PyValue::dict();
  alloc::Settings conf = s;
  conf.memory_fraction = 0;  // not an allocator setting: memsight_device_memory's limit
  st.set("PYTORCH_CUDA_ALLOC_CONF", PyValue::str(conf.conf()));
  st.set("max_split_size",
         PyValue::integer(s.max_split_size == alloc::kNoLimit ? -1 : s.max_split_size));
  st.set("garbage_collection_threshold", PyValue::real(s.gc_threshold));
  st.set("expandable_segments", PyValue::boolean(s.expandable_segments));
  PyValue div = PyValue::dict();
  for (int i = 0; i < alloc::kDivisionIntervals; ++i)
    div.set(std::to_string(int64_t{1} << i), PyValue::integer(s.divisions[i]));
  st.set("roundup_power2_divisions", std::move(div));
  return st;
}

// The device each run was completed on, as memsight's OOM observer writes
// it: whatif and summary read it back.
PyValue device_memory(const std::vector<DeviceRun>& runs) {
  PyValue list = PyValue::list();
  for (const DeviceRun& run : runs) {
    if (run.memory.total <= 0) continue;
    PyValue d = PyValue::dict();
    d.set("device", PyValue::integer(static_cast<int64_t>(run.device)));
    d.set("total", PyValue::integer(run.memory.total));
    d.set("limit", run.memory.limit >= 0 ? PyValue::integer(run.memory.limit) : PyValue::none());
    list.items.push_back(std::move(d));
  }
  return list;
}

// memsight_tags with each storage at its block's simulated address; a
// storage whose block is not live as the run ended (it ran out of memory
// first) is left out.
PyValue moved_tags(const PyValue& tags, const std::vector<DeviceRun>& runs, int64_t& dropped) {
  PyValue out = tags;
  const PyValue* storages = tags.get("storages");
  if (!storages || storages->kind != PyValue::Kind::List) return out;
  PyValue kept = PyValue::list();
  for (const PyValue& e : storages->items) {
    const PyValue *dev = e.get("device"), *addr = e.get("addr");
    if (!dev || !addr || dev->kind != PyValue::Kind::Int || addr->kind != PyValue::Kind::Int) {
      kept.items.push_back(e);
      continue;
    }
    auto run = std::find_if(runs.begin(), runs.end(), [&](const DeviceRun& r) {
      return static_cast<int64_t>(r.device) == dev->i;
    });
    if (run == runs.end()) {
      kept.items.push_back(e);
      continue;
    }
    auto it = run->live.upper_bound(addr->i);
    if (it == run->live.begin() || addr->i >= std::prev(it)->second.first) {
      ++dropped;
      continue;
    }
    --it;
    PyValue moved = e;
    moved.set("addr", PyValue::integer(it->second.second + (addr->i - it->first)));
    kept.items.push_back(std::move(moved));
  }
  out.set("storages", std::move(kept));
  return out;
}

// memsight_estimate as the front end wrote it, with what completed it.
PyValue record(const Snapshot& in, const std::vector<DeviceRun>& runs, const alloc::Settings& s,
               int64_t tags_dropped) {
  const PyValue* had = in.top("memsight_estimate");
  PyValue est = had && had->kind == PyValue::Kind::Dict ? *had : PyValue::dict();
  PyValue c = PyValue::dict();
  c.set("by", PyValue::str(std::string(named_version())));
  c.set("settings", PyValue::str(s.conf()));
  PyValue devices = PyValue::list();
  for (const DeviceRun& run : runs) {
    const simulate::Result& r = run.result;
    PyValue d = PyValue::dict();
    d.set("device", PyValue::integer(static_cast<int64_t>(run.device)));
    d.set("device_memory",
          run.memory.total > 0 ? PyValue::integer(run.memory.total) : PyValue::none());
    d.set("memory_limit",
          run.memory.limit >= 0 ? PyValue::integer(run.memory.limit) : PyValue::none());
    d.set("peak_allocated", PyValue::integer(r.peak.allocated));
    d.set("peak_reserved", PyValue::integer(r.peak.reserved));
    d.set("unused_at_peak", PyValue::integer(r.unused_at_peak));
    d.set("oom_entry", run.oom_row >= 0 ? PyValue::integer(run.oom_row) : PyValue::none());
    devices.items.push_back(std::move(d));
  }
  c.set("devices", std::move(devices));
  if (tags_dropped) c.set("tags_not_live", PyValue::integer(tags_dropped));
  est.set("completed", std::move(c));
  return est;
}

}  // namespace

void complete_top_level(const Snapshot& in, const std::vector<DeviceRun>& runs,
                        const alloc::Settings& settings, Snapshot& out) {
  set_top(out, "allocator_settings", allocator_settings(in, settings));
  if (PyValue mem = device_memory(runs); !mem.items.empty())
    set_top(out, "memsight_device_memory", std::move(mem));
  int64_t dropped = 0;
  if (const PyValue* tags = in.top("memsight_tags"))
    set_top(out, "memsight_tags", moved_tags(*tags, runs, dropped));
  set_top(out, "memsight_estimate", record(in, runs, settings, dropped));
}

}  // namespace memsight::estimate
