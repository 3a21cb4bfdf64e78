// render_page_data: the page's data of page_data.cpp packed into columns
// (page_pack.h: the tables of page_tables.h, each device by page_device.cpp)
// with the page's metadata and summary. `memsight view` compresses and embeds
// it (html.cpp); the standalone viewer's WebAssembly engine hands it to the
// page as is.
#include <string>

#include "memsight/error.h"
#include "memsight/html.h"
#include "memsight/summary.h"
#include "report/page_data.h"
#include "report/page_device.h"
#include "report/page_json.h"
#include "report/page_pack.h"
#include "report/page_tables.h"
#include "report/phase_timer.h"
#include "util/escape.h"

namespace memsight {

using report::JsonObject;
using report::PagePacker;
using report::PageTables;
using report::PhaseTimer;
using report::pyvalue_json;

bool is_html_view(std::string_view v) {
  return v == "overview" || v == "timeline" || v == "segments-timeline" || v == "state" ||
         v == "pools" || v == "flamegraph" || v == "settings";
}

std::string render_page_data(const Snapshot& snap, const HtmlOptions& opts) {
  std::string view = opts.view.empty() ? "overview" : opts.view;
  if (!is_html_view(view))
    throw Error("unknown view '" + view +
                "' (overview, timeline, segments-timeline, state, pools, flamegraph, settings)");
  std::string title = opts.title.empty() ? "memsight" : opts.title;

  PhaseTimer phase;
  // The overview shows `memsight summary`; callers that computed it pass it
  // in. First, so that its replay's memory is free again before the page's
  // data is built (the standalone viewer's engine has at most 4 GiB).
  std::string summary =
      opts.summary_json.empty()
          ? summary_json(snap,
                         summarize(snap, {.user_code = opts.user_code, .empty_devices = false}),
                         /*every_device=*/false)
          : opts.summary_json;
  phase("summary");
  report::Annotated ann = report::annotate(snap);
  phase("annotate");
  PagePacker packer;
  if (opts.column_sink) packer.set_sink(opts.column_sink);
  PageTables tables(snap, opts.user_code);
  auto used = [&](size_t d) { return !ann.events[d].row.empty() || !ann.segments[d].empty(); };
  size_t default_device = 0, longest = 0;
  bool any = false;
  for (size_t d = 0; d < ann.devices; ++d) {
    size_t n = ann.events[d].row.size();
    if (used(d) && (!any || n > longest)) {
      default_device = d;
      longest = n;
      any = true;
    }
  }
  if (opts.device >= 0 && static_cast<size_t>(opts.device) < ann.devices)
    default_device = static_cast<size_t>(opts.device);
  // A device with no events and no segments is left out of the page (its
  // columns, about 60 header entries, and its metadata would cost kilobytes
  // each, and a snapshot can list 100,000 empty device traces): the page
  // knows them from meta.deviceCount. The default device is packed whatever
  // it holds, so that an all-empty snapshot still has a device to show.
  std::string devices = "[";
  for (size_t d = 0; d < ann.devices; ++d) {
    if (!used(d) && d != default_device) continue;
    if (devices.size() > 1) devices += ',';
    devices += pack_device(packer, tables, snap, ann, d, phase);
  }
  devices += ']';
  tables.pack(packer);
  phase("page data");

  std::string streams = "[";
  for (size_t i = 0; i < ann.stream_raw.size(); ++i) {
    if (i) streams += ',';
    append_json_string(streams, std::to_string(ann.stream_raw[i]));
  }
  streams += ']';
  std::string settings = "null", annotations = "0", top_keys = "[";
  if (const PyValue* v = snap.top("allocator_settings")) {
    settings.clear();
    pyvalue_json(settings, *v);
  }
  if (const PyValue* v = snap.top("external_annotations"); v && v->kind == PyValue::Kind::List)
    annotations = std::to_string(v->items.size());
  for (size_t i = 0; i < snap.top_keys.size(); ++i) {
    if (i) top_keys += ',';
    append_json_string(top_keys, snap.top_keys[i]);
  }
  top_keys += ']';

  std::string meta = JsonObject()
                         .str("title", title)
                         .str("view", view)
                         .str("generator", "memsight 0.1.0")
                         .str("sourceName", opts.source_name)
                         .num("sourceBytes", static_cast<double>(opts.source_bytes))
                         .num("defaultDevice", static_cast<double>(default_device))
                         .num("deviceCount", static_cast<double>(ann.devices))
                         .raw("devices", devices)
                         .raw("streams", streams)
                         .raw("settings", settings)
                         .raw("summary", summary)
                         .num("entries", static_cast<double>(snap.trace.rows()))
                         .num("segments", static_cast<double>(snap.segments.size()))
                         .num("blocks", static_cast<double>(snap.blocks.size()))
                         .num("annotations", std::stod(annotations))
                         .num("strings", static_cast<double>(tables.strings()))
                         .num("frames", static_cast<double>(tables.frames()))
                         .num("stacks", static_cast<double>(tables.stacks()))
                         .boolean("legacy", snap.legacy_segment_list)
                         .raw("topKeys", top_keys)
                         .done();
  std::string raw = packer.finish(meta);
  phase("pack");
  return raw;
}

}  // namespace memsight
