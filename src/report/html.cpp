// render_html: the page data of page_data.cpp packed into columns
// (page_pack.h: the tables of page_tables.h, each device by page_device.cpp),
// compressed, and poured into the viewer's template with the viewer's CSS
// and JavaScript (viewer/src, embedded at build time).
#include "memsight/html.h"

#include <string>

#include "memsight/error.h"
#include "memsight/summary.h"
#include "report/bundle.h"
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
         v == "flamegraph";
}

std::string render_html(const Snapshot& snap, const HtmlOptions& opts) {
  std::string view = opts.view.empty() ? "overview" : opts.view;
  if (!is_html_view(view))
    throw Error("unknown view '" + view +
                "' (overview, timeline, segments-timeline, state, flamegraph)");
  std::string title = opts.title.empty() ? "memsight" : opts.title;

  PhaseTimer phase;
  report::Annotated ann = report::annotate(snap);
  phase("annotate");
  PagePacker packer;
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
  // metadata would cost hundreds of bytes each, and a snapshot can list
  // 100,000 empty device traces): the page knows them from meta.deviceCount.
  // The default device is packed whatever it holds, so that an all-empty
  // snapshot still has a device to show.
  size_t packed = 0;
  for (size_t d = 0; d < ann.devices; ++d) packed += used(d) || d == default_device;
  report::DeviceColumns columns(packer, packed);
  std::string devices = "[";
  for (size_t d = 0; d < ann.devices; ++d) {
    if (!used(d) && d != default_device) continue;
    if (devices.size() > 1) devices += ',';
    devices += pack_device(columns, tables, snap, ann, d, phase);
  }
  devices += ']';
  columns.finish();
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

  // The overview shows `memsight summary`; callers that computed it pass it in.
  std::string summary = opts.summary_json.empty()
                            ? summary_json(snap, summarize(snap, {.user_code = opts.user_code}),
                                           DeviceListing::Page)
                            : opts.summary_json;
  std::string meta = JsonObject()
                         .reserve(devices.size() + summary.size() + settings.size() + 4096)
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
  phase("summary");
  std::string().swap(devices);  // held by meta now
  std::string().swap(summary);
  std::string raw = packer.finish(meta);
  std::string().swap(meta);
  std::string payload = opts.compress ? report::deflate_base64(raw, 4) : report::base64(raw);
  phase("compress");

  std::string page(viewer_asset("page.html"));
  if (page.empty()) throw Error("html: viewer assets missing (page.html)");
  std::string js = bundle_js("bundle.txt");
  replace_all(js, "</script", "<\\/script");
  std::string data =
      "<script id=\"memsight-data\" type=\"application/octet-stream\" data-encoding=\"";
  data += opts.compress ? "deflate" : "none";
  data += "\" data-size=\"" + std::to_string(raw.size()) + "\">";
  // Splice the big pieces in last, in one pass, to avoid copying them around.
  replace_all(page, "{{TITLE}}", html_escape(title));
  replace_all(page, "/*{{CSS}}*/", viewer_asset("style.css"));
  size_t js_at = page.find("/*{{JS}}*/");
  size_t data_at = page.find("<!--{{DATA}}-->");
  if (js_at == std::string::npos || data_at == std::string::npos || data_at > js_at)
    throw Error("html: page.html lacks its {{DATA}} or {{JS}} marker");
  std::string out;
  out.reserve(page.size() + js.size() + data.size() + payload.size() + 16);
  out.append(page, 0, data_at);
  out += data;
  out += payload;
  out += "</script>";
  out.append(page, data_at + 15, js_at - data_at - 15);
  out += js;
  out.append(page, js_at + 10, std::string::npos);
  return out;
}

}  // namespace memsight
