// render_page_data: the page's data of page_data.cpp packed into columns
// (page_pack.h: the tables of page_tables.h, each device by page_device.cpp)
// with the page's metadata and summary. `memsight view` compresses and embeds
// it (html.cpp); the standalone viewer's WebAssembly engine hands it to the
// page as is.
#include <algorithm>
#include <string>
#include <vector>

#include "analysis/alike/alike.h"
#include "analysis/summary/summary_times.h"
#include "memsight/error.h"
#include "memsight/html.h"
#include "memsight/input_limits.h"
#include "memsight/leaks.h"
#include "memsight/summary.h"
#include "report/page_data.h"
#include "report/page_device.h"
#include "report/page_json.h"
#include "report/page_pack.h"
#include "report/page_tables.h"
#include "report/phase_timer.h"
#include "util/json_writer.h"
#include "util/version.h"

namespace memsight {

using report::PagePacker;
using report::PageTables;
using report::PhaseTimer;
using report::pyvalue_json;

namespace {

// Trace entries and segments per device, over the devices a page knows
// (annotate's: the traces, and segment devices below 4096; at least one).
struct DeviceLoad {
  std::vector<size_t> rows, segments;
  bool used(size_t d) const { return rows[d] || segments[d]; }
};

DeviceLoad device_load(const Snapshot& snap) {
  size_t devices = snap.device_count();
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && s.device < 4096) devices = std::max<size_t>(devices, s.device + 1);
  devices = std::max<size_t>(devices, 1);
  DeviceLoad load{std::vector<size_t>(devices), std::vector<size_t>(devices)};
  for (size_t d = 0; d < snap.device_count(); ++d) {
    auto [begin, end] = snap.device_rows(d);
    load.rows[d] = end - begin;
  }
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && static_cast<size_t>(s.device) < devices) ++load.segments[s.device];
  return load;
}

// `memsight leaks --json` of the devices the page holds (`keep`), alike
// ones once as in the summary, names cut as in the tables.
std::string page_leaks(const Snapshot& snap, const UserCode& user_code, std::vector<size_t> keep) {
  Leaks leaks = find_leaks(snap, user_code);
  keep_devices(leaks.devices, leaks.members, std::move(keep));
  std::string json = report::cut_json_strings(leaks_json(snap, leaks), kNameLimit);
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

}  // namespace

std::vector<size_t> page_devices(const Snapshot& snap, int device) {
  DeviceLoad load = device_load(snap);
  const size_t n = load.rows.size();
  if (device >= 0 && static_cast<size_t>(device) >= n)
    throw Error("device " + std::to_string(device) + " is not in the snapshot: it lists " +
                (n == 1 ? std::string("device 0") : "devices 0 to " + std::to_string(n - 1)));
  if (device < -1) throw Error("device " + std::to_string(device) + " is not a device number");
  // The busiest devices with data, the first one most rows (ties: lower index).
  std::vector<size_t> used;
  for (size_t d = 0; d < n; ++d)
    if (load.used(d)) used.push_back(d);
  size_t keep = std::min(used.size(), kPageDevices);
  std::partial_sort(used.begin(), used.begin() + static_cast<ptrdiff_t>(keep), used.end(),
                    [&](size_t a, size_t b) {
                      return load.rows[a] != load.rows[b] ? load.rows[a] > load.rows[b] : a < b;
                    });
  used.resize(keep);
  size_t first = device >= 0 ? static_cast<size_t>(device) : used.empty() ? 0 : used.front();
  std::erase(used, first);
  if (used.size() == kPageDevices) used.pop_back();  // room for the one asked for
  std::sort(used.begin(), used.end());
  used.insert(used.begin(), first);
  return used;
}

std::string page_summary_json(const Snapshot& snap, Summary s, std::vector<size_t> devices) {
  // Each group keeps the devices of its that the page holds (a group of
  // 100,000 alike devices keeps at most kPageDevices); groups with none go.
  // A group may be named by another of its devices after: its times are
  // made that device's (counted from the first entry in between).
  for (DeviceSummary& d : s.devices)
    shift_times(d, first_entry_time(snap, static_cast<size_t>(d.device)), 0);
  keep_devices(s.devices, s.members, std::move(devices));
  for (DeviceSummary& d : s.devices)
    shift_times(d, 0, first_entry_time(snap, static_cast<size_t>(d.device)));
  return summary_json(snap, s, DeviceListing::Page);
}

size_t devices_with_data(const Snapshot& snap) {
  DeviceLoad load = device_load(snap);
  size_t n = 0;
  for (size_t d = 0; d < load.rows.size(); ++d) n += load.used(d);
  return n;
}

bool is_html_view(std::string_view v) {
  return v == "overview" || v == "timeline" || v == "segments-timeline" || v == "state" ||
         v == "pools" || v == "flamegraph" || v == "settings" || v == "leaks";
}

namespace {

// The view asked for, checked.
std::string page_view(const HtmlOptions& opts) {
  std::string view = opts.view.empty() ? "overview" : opts.view;
  if (!is_html_view(view))
    throw Error("unknown view '" + view +
                "' (overview, timeline, segments-timeline, state, pools, flamegraph, settings, "
                "leaks)");
  return view;
}

// What the page's metadata carries besides the snapshot's own numbers.
struct PageParts {
  std::string view, summary, leaks;
  size_t default_device = 0;
  std::vector<std::string> devices;  // each packed device's metadata
};

// The overview shows `memsight summary` of the devices the page holds;
// callers that computed it pass it in. Its names are cut already, piece by
// piece (a site joins a cut name to a file and line: cut again as a whole,
// it would lose the length the first cut said). The leaks view shows
// `memsight leaks --json`. Both come first, so that their replays' memory
// is free again before the page's data is built (the standalone viewer's
// engine has at most 4 GiB).
void overview_and_leaks(PageParts& parts, const Snapshot& snap, const HtmlOptions& opts,
                        const std::vector<size_t>& packed, PhaseTimer& phase) {
  parts.summary =
      opts.summary_json.empty()
          ? page_summary_json(snap, summarize(snap, {.user_code = opts.user_code}), packed)
          : opts.summary_json;
  phase("summary");
  parts.leaks = page_leaks(snap, opts.user_code, packed);
  phase("leaks");
}

// The devices' columns, in device order, then the shared tables'.
void pack_devices(PageParts& parts, PagePacker& packer, PageTables& tables, const Snapshot& snap,
                  const report::Annotated& ann, std::vector<size_t> in_order, PhaseTimer& phase) {
  std::sort(in_order.begin(), in_order.end());
  report::DeviceColumns columns(packer, in_order.size());
  for (size_t d : in_order)
    parts.devices.push_back(pack_device(columns, tables, snap, ann, d, phase));
  columns.finish();
  tables.pack(packer);
}

// The page's metadata: the blob's JSON beside its columns.
std::string page_meta(const Snapshot& snap, const HtmlOptions& opts, const PageParts& parts,
                      const report::Annotated& ann, const PageTables& tables) {
  size_t devices_bytes = 0;
  for (const std::string& d : parts.devices) devices_bytes += d.size() + 1;
  std::string meta;
  meta.reserve(devices_bytes + parts.summary.size() + parts.leaks.size() + 4096);
  JsonWriter w(meta);
  w.begin_document()
      .field("title", opts.title.empty() ? "memsight" : opts.title)
      .field("view", parts.view)
      .field("generator", named_version())
      .field("sourceName", opts.source_name)
      .field("sourceBytes", opts.source_bytes)
      .field("defaultDevice", parts.default_device)
      .field("deviceCount", ann.devices)
      .field("devicesWithData", devices_with_data(snap))
      .key("devices")
      .begin_array();
  for (const std::string& d : parts.devices) w.raw(d);
  w.end_array().key("streams").begin_array();
  for (auto stream : ann.stream_raw) w.value(std::to_string(stream));
  w.end_array().key("settings");
  if (const PyValue* v = snap.top("allocator_settings"))
    pyvalue_json(w, *v);
  else
    w.null();
  const PyValue* notes = snap.top("external_annotations");
  w.raw_field("summary", parts.summary)
      .raw_field("leaks", parts.leaks)
      .field("entries", snap.trace.rows())
      .field("segments", snap.segments.size())
      .field("blocks", snap.blocks.size())
      .field("annotations", notes && notes->kind == PyValue::Kind::List ? notes->items.size() : 0)
      .field("strings", tables.strings())
      .field("frames", tables.frames())
      .field("stacks", tables.stacks())
      .field("legacy", snap.legacy_segment_list)
      .key("topKeys")
      .begin_array();
  for (const std::string& k : snap.top_keys) w.value(k);
  w.end_array().end_object();
  return meta;
}

}  // namespace

std::string render_page_data(const Snapshot& snap, const HtmlOptions& opts) {
  PageParts parts;
  parts.view = page_view(opts);
  PhaseTimer phase;
  // A device with no events and no segments is left out of the page (its
  // columns, about 60 header entries, and its metadata would cost kilobytes
  // each, and a snapshot can list 100,000 empty device traces): the page
  // knows them from meta.deviceCount. So are devices with data past the
  // kPageDevices busiest (meta.devicesWithData counts them). The default
  // device is packed whatever it holds, so that an all-empty snapshot still
  // has a device to show.
  std::vector<size_t> packed = page_devices(snap, opts.device);
  parts.default_device = packed.front();
  overview_and_leaks(parts, snap, opts, packed, phase);
  report::Annotated ann = report::annotate(snap);
  phase("annotate");
  PagePacker packer;
  if (opts.column_sink) packer.set_sink(opts.column_sink);
  PageTables tables(snap, opts.user_code);
  pack_devices(parts, packer, tables, snap, ann, std::move(packed), phase);
  phase("page data");
  std::string meta = page_meta(snap, opts, parts, ann, tables);
  phase("meta");
  std::vector<std::string>().swap(parts.devices);  // held by meta now
  std::string().swap(parts.summary);
  std::string().swap(parts.leaks);
  std::string raw = packer.finish(meta);
  std::string().swap(meta);
  phase("pack");
  return raw;
}

}  // namespace memsight
