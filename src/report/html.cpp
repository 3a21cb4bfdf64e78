// render_html: the page data of page_data.cpp packed into columns
// (page_pack.h), compressed, and poured into the viewer's template with the
// viewer's CSS and JavaScript (viewer/src, embedded at build time).
#include "memsight/html.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "memsight/error.h"
#include "memsight/summary.h"
#include "report/bundle.h"
#include "report/page_data.h"
#include "report/page_pack.h"
#include "util/escape.h"
#include "util/lines.h"

namespace memsight {
namespace {

using report::PagePacker;

constexpr uint32_t kUnset = std::numeric_limits<uint32_t>::max();

// The page's string, frame and stack tables: only what the page refers to,
// renumbered densely (0 is the empty string / the empty stack).
class PageTables {
 public:
  PageTables(const Snapshot& snap, const UserCode& user_code)
      : snap_(snap),
        kinds_(snap, user_code),
        str_map_(snap.strings.size(), kUnset),
        frame_map_(snap.frames.frame_count(), kUnset),
        stack_map_(snap.frames.stack_count(), kUnset) {
    text("");
    str_map_[0] = 0;
    stack_map_[0] = 0;
    stack_off_ = {0, 0};
  }

  uint32_t str(StrId id) {
    uint32_t& m = str_map_[id];
    if (m == kUnset) m = text(snap_.str(id));
    return m;
  }
  uint32_t text(std::string_view s) {
    auto [it, inserted] = text_index_.try_emplace(std::string(s), 0);
    if (inserted) {
      it->second = static_cast<uint32_t>(off_.size());
      blob_ += s;
      off_.push_back(blob_.size());
    }
    return it->second;
  }
  uint32_t stack(StackId id) {
    uint32_t& m = stack_map_[id];
    if (m != kUnset) return m;
    for (FrameId f : snap_.frames.stack(id)) stack_frames_.push_back(frame(f));
    stack_off_.push_back(stack_frames_.size());
    m = static_cast<uint32_t>(stack_off_.size() - 2);
    return m;
  }

  void pack(PagePacker& p) {
    p.u8("strings.blob", blob_);
    std::vector<int64_t> off(off_.begin(), off_.end());
    off.insert(off.begin(), 0);
    p.ints("strings.off", off);
    p.ints("frames.name", f_name_);
    p.ints("frames.file", f_file_);
    p.ints("frames.line", f_line_);
    p.ints("frames.fx", f_fx_);
    p.ints("frames.kind", f_kind_);
    p.ints("stacks.off", stack_off_);
    p.ints("stacks.frames", stack_frames_);
  }
  size_t strings() const { return off_.size(); }
  size_t frames() const { return f_name_.size(); }
  size_t stacks() const { return stack_off_.size() - 1; }

 private:
  uint32_t frame(FrameId id) {
    uint32_t& m = frame_map_[id];
    if (m != kUnset) return m;
    const Frame& f = snap_.frames.frame(id);
    m = static_cast<uint32_t>(f_name_.size());
    f_name_.push_back(str(f.name));
    f_file_.push_back(str(f.filename));
    f_line_.push_back(f.line);
    f_fx_.push_back(f.extra ? text(fx_text(snap_.frames.extras[f.extra - 1])) : 0);
    f_kind_.push_back(static_cast<int64_t>(kinds_.kind(id)));
    return m;
  }
  // MemoryViz's FX annotation lines of a frame that carries fx_* keys.
  static std::string fx_text(const PyValue& d) {
    auto s = [&](const char* k) -> std::string {
      const PyValue* v = d.get(k);
      if (!v) return "";
      return v->kind == PyValue::Kind::Str ? v->s : py_repr(*v);
    };
    std::string out;
    if (d.get("fx_node_op") || d.get("fx_node_name") || d.get("fx_node_target"))
      out += "\n    >> FX: node=" + s("fx_node_name") + ", op=" + s("fx_node_op") +
             ", target=" + s("fx_node_target");
    if (const PyValue* t = d.get("fx_original_trace"); t && t->kind == PyValue::Kind::Str) {
      out += "\n    >> Original Model Code:";
      size_t b = 0;
      const std::string& tr = t->s;
      while (b < tr.size()) {
        size_t e = tr.find('\n', b);
        if (e == std::string::npos) e = tr.size();
        out += "\n      " + tr.substr(b, e - b);
        b = e + 1;
      }
    }
    return out;
  }

  const Snapshot& snap_;
  FrameClassifier kinds_;
  std::vector<uint32_t> str_map_, frame_map_, stack_map_;
  std::unordered_map<std::string, uint32_t> text_index_;
  std::string blob_;
  std::vector<uint64_t> off_;
  std::vector<int64_t> f_name_, f_file_, f_line_, f_fx_, f_kind_;
  std::vector<int64_t> stack_off_, stack_frames_;
};

void json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

// Python value as JSON (allocator_settings and friends); what JSON lacks
// (big ints, bytes, non-string keys) becomes a string.
void pyvalue_json(std::string& out, const PyValue& v) {
  using K = PyValue::Kind;
  switch (v.kind) {
    case K::None:
      out += "null";
      break;
    case K::Bool:
      out += v.b ? "true" : "false";
      break;
    case K::Int:
      out += std::to_string(v.i);
      break;
    case K::BigInt:
      append_json_string(out, bigint_decimal(v.s));
      break;
    case K::Float:
      json_number(out, v.f);
      break;
    case K::Str:
      append_json_string(out, v.s);
      break;
    case K::Bytes:
      append_json_string(out, py_repr(v));
      break;
    case K::List:
    case K::Tuple:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        pyvalue_json(out, v.items[i]);
      }
      out += ']';
      break;
    case K::Dict:
      out += '{';
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        if (i) out += ',';
        const PyValue& k = v.items[i];
        append_json_string(out, k.kind == K::Str ? k.s : py_repr(k));
        out += ':';
        pyvalue_json(out, v.items[i + 1]);
      }
      out += '}';
      break;
  }
}

struct JsonObject {
  std::string s = "{";
  JsonObject& key(std::string_view k) {
    if (s.size() > 1) s += ',';
    append_json_string(s, k);
    s += ':';
    return *this;
  }
  JsonObject& num(std::string_view k, double v) {
    key(k);
    json_number(s, v);
    return *this;
  }
  JsonObject& str(std::string_view k, std::string_view v) {
    key(k);
    append_json_string(s, v);
    return *this;
  }
  JsonObject& boolean(std::string_view k, bool v) {
    key(k);
    s += v ? "true" : "false";
    return *this;
  }
  JsonObject& raw(std::string_view k, std::string_view json) {
    key(k);
    s += json;
    return *this;
  }
  std::string done() { return s + '}'; }
};

// MEMSIGHT_TIMING=1 prints how long each step of render_html takes.
class PhaseTimer {
 public:
  PhaseTimer() : on_(std::getenv("MEMSIGHT_TIMING") != nullptr), last_(Clock::now()) {}
  void operator()(const char* what) {
    if (!on_) return;
    auto now = Clock::now();
    std::fprintf(stderr, "render_html: %-12s %7.1f ms\n", what,
                 std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  Clock::time_point last_;
};

std::string timeline_meta(const report::Timeline& tl) {
  return JsonObject()
      .num("elements", static_cast<double>(tl.kind.size()))
      .num("initial", tl.initial)
      .num("cpInterval", tl.cp_interval)
      .num("envBucket", tl.env_bucket)
      .num("peak", tl.peak)
      .num("peakEvent", static_cast<double>(tl.peak_event))
      .num("initialTotal", tl.initial_total)
      .num("finalTotal", tl.final_total)
      .done();
}

// Only what the browser cannot cheaply rebuild: the sources of the
// initially live elements (alloc elements follow the alloc events in order),
// the ends, the level-of-detail order and the checkpoints. The kinds and
// MemoryViz's element indices follow from these (timeline.js).
void pack_timeline(PagePacker& p, const std::string& pre, const report::Timeline& tl) {
  std::vector<int32_t> isrc(tl.src.begin(), tl.src.begin() + tl.initial);
  p.ints_of(pre + "isrc", isrc);
  p.ints_of(pre + "end", tl.end);
  p.ints_of(pre + "bysize", tl.by_size);
  p.ints_of(pre + "cpoff", tl.cp_off);
  p.ints_of(pre + "cpids", tl.cp_ids);
  p.f64(pre + "envmax", tl.env_max);
  p.f64(pre + "envmin", tl.env_min);
}

void pack_flame(PagePacker& p, PageTables& tables, const std::string& pre,
                const report::FlameTree& t) {
  std::vector<int64_t> names(t.name.size());
  for (size_t i = 0; i < names.size(); ++i) names[i] = tables.text(t.name[i]);
  p.ints_of(pre + "parent", t.parent);
  p.ints(pre + "name", names);
  p.ints_of(pre + "value", t.value);
}

// One device: its events, snapshot segments and blocks, both timelines, the
// state checkpoints and the flamegraphs. Returns the device's metadata.
std::string pack_device(PagePacker& p, PageTables& tables, const Snapshot& snap,
                        const report::Annotated& ann, size_t d, PhaseTimer& phase) {
  const std::string pre = "d" + std::to_string(d) + ".";
  const report::DeviceEvents& ev = ann.events[d];
  const TraceTable& t = snap.trace;
  const size_t n = ev.row.size();

  std::vector<int64_t> action(n), addr(n), size(n), stream(n), stack(n), dt(n), cc(n), meta(n),
      other(n), entry(n);
  const uint32_t first_row = d < snap.device_count() ? snap.device_rows(d).first : 0;
  int64_t t0 = n ? t.time_us[ev.row[0]] : 0, prev = t0;
  bool has_time = false;
  size_t ooms = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t r = ev.row[i];
    // The trace entry index, as `memsight trace` and `summary` name events
    // (a free_requested + free_completed pair shown as one event: the first).
    entry[i] = r - first_row;
    action[i] = static_cast<int64_t>(ev.action[i]);
    addr[i] = t.addr[r];
    size[i] = t.size[r];
    stream[i] = ann.stream(t.stream[r]);
    stack[i] = tables.stack(t.stack[r]);
    // Times only move forward on the page (the allocator's clock is an
    // approximation); the tooltip shows the page time.
    int64_t now = t.time_us[r];
    if (now) has_time = true;
    dt[i] = std::clamp<int64_t>(now - prev, 0, std::numeric_limits<uint32_t>::max());
    prev = std::max(prev, now);
    cc[i] = tables.str(t.compile_context[r]);
    meta[i] = tables.str(t.user_metadata[r]);
    if (ev.action[i] == report::PageAction::Other)
      if (auto it = t.action_name.find(r); it != t.action_name.end())
        other[i] = tables.str(it->second);
    if (ev.action[i] == report::PageAction::Oom) ++ooms;
  }
  p.ints(pre + "ev.action", action);
  p.ints(pre + "ev.entry", entry);
  p.ints(pre + "ev.addr", addr);
  p.ints(pre + "ev.size", size);
  p.ints(pre + "ev.stream", stream);
  p.ints(pre + "ev.stack", stack);
  p.ints_of(pre + "ev.version", ev.version);
  p.ints(pre + "ev.dt", dt);
  p.ints(pre + "ev.cc", cc);
  p.ints(pre + "ev.meta", meta);
  p.ints(pre + "ev.other", other);
  phase("events");

  // Snapshot segments and blocks of this device (block ranges made device-relative).
  const auto& segs = ann.segments[d];
  std::vector<double> saddr, baddr;
  std::vector<int64_t> ssize, sstream, sver, sstack, spool0, spool1, sexp, stype, salloc, sactive,
      sreq, sbb, sbe, sglobal;
  std::vector<int64_t> bsize, breq, bstate, bname, bver, bstack, bglobal;
  for (uint32_t si : segs) {
    const Segment& s = snap.segments[si];
    saddr.push_back(static_cast<double>(s.address));
    ssize.push_back(s.total_size);
    sstream.push_back(ann.stream(s.stream));
    sver.push_back(ann.segment_version[si]);
    sstack.push_back(tables.stack(s.stack));
    spool0.push_back(s.pool_id[0]);
    spool1.push_back(s.pool_id[1]);
    sexp.push_back(s.is_expandable);
    stype.push_back(tables.str(s.segment_type));
    salloc.push_back(s.allocated_size);
    sactive.push_back(s.active_size);
    sreq.push_back(s.requested_size);
    sglobal.push_back(si);
    sbb.push_back(static_cast<int64_t>(baddr.size()));
    for (uint32_t b = s.block_begin; b < s.block_end; ++b) {
      const Block& blk = snap.blocks[b];
      baddr.push_back(static_cast<double>(blk.address));
      bsize.push_back(blk.size);
      breq.push_back(blk.requested_size);
      bstate.push_back(static_cast<int64_t>(blk.state));
      bname.push_back(blk.state == BlockState::Other ? tables.str(blk.state_name) : 0);
      bver.push_back(ann.block_version[b]);
      bstack.push_back(tables.stack(blk.stack));
      bglobal.push_back(b);
    }
    sbe.push_back(static_cast<int64_t>(baddr.size()));
  }
  p.f64(pre + "seg.addr", saddr);
  p.ints(pre + "seg.size", ssize);
  p.ints(pre + "seg.stream", sstream);
  p.ints(pre + "seg.version", sver);
  p.ints(pre + "seg.stack", sstack);
  p.ints(pre + "seg.pool0", spool0);
  p.ints(pre + "seg.pool1", spool1);
  p.ints(pre + "seg.expandable", sexp);
  p.ints(pre + "seg.type", stype);
  p.ints(pre + "seg.allocated", salloc);
  p.ints(pre + "seg.active", sactive);
  p.ints(pre + "seg.requested", sreq);
  p.ints(pre + "seg.bbegin", sbb);
  p.ints(pre + "seg.bend", sbe);
  p.f64(pre + "blk.addr", baddr);
  p.ints(pre + "blk.size", bsize);
  p.ints(pre + "blk.req", breq);
  p.ints(pre + "blk.state", bstate);
  p.ints(pre + "blk.sname", bname);
  p.ints(pre + "blk.version", bver);
  p.ints(pre + "blk.stack", bstack);

  // Sources of timeline and state elements are snapshot-global indices in
  // the engine; the page wants them device-relative.
  std::unordered_map<int64_t, int32_t> seg_local, blk_local;
  for (size_t i = 0; i < sglobal.size(); ++i) seg_local[sglobal[i]] = static_cast<int32_t>(i);
  for (size_t i = 0; i < bglobal.size(); ++i) blk_local[bglobal[i]] = static_cast<int32_t>(i);
  auto localize = [](std::vector<int32_t>& src, const std::unordered_map<int64_t, int32_t>& m) {
    for (int32_t& s : src)
      if (s < 0) s = ~m.at(~s);
  };

  phase("segments");
  report::Timeline tl = report::build_timeline(snap, ann, d, false);
  localize(tl.src, blk_local);
  phase("timeline");
  pack_timeline(p, pre + "tl.", tl);
  phase("pack tl");
  report::Timeline st = report::build_timeline(snap, ann, d, true);
  localize(st.src, seg_local);
  pack_timeline(p, pre + "st.", st);
  phase("segments tl");

  report::StateCheckpoints sc =
      report::build_state_checkpoints(snap, ann, d, report::checkpoint_interval(n));
  localize(sc.seg_src, seg_local);
  localize(sc.blk_src, blk_local);
  p.ints_of(pre + "sc.soff", sc.seg_off);
  p.f64(pre + "sc.saddr", sc.seg_addr);
  p.f64(pre + "sc.ssize", sc.seg_size);
  p.ints_of(pre + "sc.ssrc", sc.seg_src);
  p.ints_of(pre + "sc.boff", sc.blk_off);
  p.ints_of(pre + "sc.bsrc", sc.blk_src);
  p.ints_of(pre + "sc.bflag", sc.blk_flag);
  phase("state cps");

  pack_flame(p, tables, pre + "fm.", report::build_flame_tree(snap, ann, d, false));
  pack_flame(p, tables, pre + "fs.", report::build_flame_tree(snap, ann, d, true));

  size_t free_only = 0;
  for (auto k : tl.kind) free_only += k == report::ElementKind::FreeOnly;
  auto [rb, re] =
      d < snap.device_count() ? snap.device_rows(d) : std::pair<uint32_t, uint32_t>{0, 0};
  return JsonObject()
      .num("index", static_cast<double>(d))
      .num("events", static_cast<double>(n))
      .num("entries", re - rb)
      .num("segments", static_cast<double>(segs.size()))
      .num("blocks", static_cast<double>(baddr.size()))
      .num("t0", static_cast<double>(t0))
      .boolean("hasTime", has_time)
      .num("ooms", static_cast<double>(ooms))
      .num("freeOnly", static_cast<double>(free_only))
      .raw("tl", timeline_meta(tl))
      .raw("st", timeline_meta(st))
      .raw("sc", JsonObject()
                     .num("interval", sc.cp_interval)
                     .num("count", static_cast<double>(sc.seg_off.size() - 1))
                     .done())
      .done();
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  append_xml_escaped(out, s);
  return out;
}

// The viewer's modules as one classic script: files in `list_file` order,
// their `import` statements (at the start of a line) dropped and `export` keywords
// removed (the files are ES modules for node's test runner; a file:// page
// cannot load module files).
std::string bundle_js(std::string_view list_file) {
  std::string_view list = viewer_asset(list_file);
  if (list.empty()) throw Error("html: viewer assets missing (" + std::string(list_file) + ")");
  std::string out = "(() => {\n'use strict';\n";
  for_each_line(list, [&](std::string_view name) {
    while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.remove_suffix(1);
    if (name.empty() || name[0] == '#') return;
    std::string_view src = viewer_asset(name);
    if (src.empty()) throw Error("html: viewer asset missing: " + std::string(name));
    out += "// ---- ";
    out += name;
    out += '\n';
    bool in_import = false;  // inside a multi-line import { ... } from '...';
    for_each_line(src, [&](std::string_view line) {
      if (line.starts_with("import ") || in_import) {
        in_import = line.find(" from ") == std::string_view::npos && !line.starts_with("} from ");
        return;
      }
      if (line.starts_with("export default "))
        line.remove_prefix(15);
      else if (line.starts_with("export "))
        line.remove_prefix(7);
      out += line;
      out += '\n';
    });
  });
  out += "})();\n";
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

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

  // The overview shows `memsight summary`; callers that computed it pass it in.
  std::string summary =
      opts.summary_json.empty()
          ? summary_json(snap,
                         summarize(snap, {.user_code = opts.user_code, .empty_devices = false}),
                         /*every_device=*/false)
          : opts.summary_json;
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
  phase("summary");
  std::string raw = packer.finish(meta);
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
