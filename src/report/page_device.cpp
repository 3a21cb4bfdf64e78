#include "report/page_device.h"

#include <algorithm>
#include <vector>

#include "report/page_annotations.h"
#include "report/page_categories.h"
#include "util/json_writer.h"

namespace memsight::report {
namespace {

void timeline_meta(JsonWriter& w, std::string_view k, const report::Timeline& tl) {
  w.key(k)
      .begin_object()
      .field("elements", tl.kind.size())
      .field("initial", tl.initial)
      .field("cpInterval", tl.cp_interval)
      .field("envBucket", tl.env_bucket)
      .field("peak", tl.peak)
      .field("peakEvent", tl.peak_event)
      .field("initialTotal", tl.initial_total)
      .field("finalTotal", tl.final_total)
      .end_object();
}

// Only what the browser cannot cheaply rebuild: the sources of the
// initially live elements (alloc elements follow the alloc events in order),
// the ends, the level-of-detail order and the checkpoints. The kinds and
// MemoryViz's element indices follow from these (timeline.js).
void pack_timeline(DeviceColumns& p, const std::string& pre, const report::Timeline& tl) {
  std::vector<int32_t> isrc(tl.src.begin(), tl.src.begin() + tl.initial);
  p.ints_of(pre + "isrc", isrc);
  p.ints_of(pre + "end", tl.end);
  p.ints_of(pre + "bysize", tl.by_size);
  p.ints_of(pre + "cpoff", tl.cp_off);
  p.ints_of(pre + "cpids", tl.cp_ids);
  p.f64(pre + "envmax", tl.env_max);
  p.f64(pre + "envmin", tl.env_min);
}

void pack_flame(DeviceColumns& p, PageTables& tables, const std::string& pre,
                const report::FlameTree& t) {
  // A node's name: a text's id, or -1 - a frame's id (the page labels it).
  std::vector<int64_t> text_ids(t.texts.size());
  for (size_t i = 0; i < t.texts.size(); ++i) text_ids[i] = tables.text(t.texts[i]);
  std::vector<int64_t> names(t.name.size());
  for (size_t i = 0; i < names.size(); ++i)
    names[i] = t.name[i] >= 0 ? text_ids[t.name[i]]
                              : -1 - int64_t{tables.frame(static_cast<FrameId>(~t.name[i]))};
  p.ints_of(pre + "parent", t.parent);
  p.ints(pre + "name", std::move(names));
  p.ints_of(pre + "value", t.value);
}

// What the device's metadata says of its events.
struct EventsMeta {
  int64_t t0 = 0;
  bool has_time = false;
  size_t ooms = 0;
};

// The event columns. One column at a time: ten columns of n int64 at once
// would cost 80 bytes an event, more than the model itself. (With one device
// each is packed and freed as it comes; with more, DeviceColumns gathers
// them.)
EventsMeta pack_events(DeviceColumns& p, PageTables& tables, const Snapshot& snap,
                       const report::Annotated& ann, size_t d) {
  const report::DeviceEvents& ev = ann.events[d];
  const TraceTable& t = snap.trace;
  const size_t n = ev.row.size();
  const uint32_t first_row = d < snap.device_count() ? snap.device_rows(d).first : 0;
  auto pack_column = [&](const char* name, auto value) {
    std::vector<int64_t> col(n);
    for (size_t i = 0; i < n; ++i) col[i] = value(i, ev.row[i]);
    p.ints(name, std::move(col));
  };
  pack_column("ev.action", [&](size_t i, uint32_t) { return static_cast<int64_t>(ev.action[i]); });
  // The trace entry index, as `memsight trace` and `summary` name events
  // (a free_requested + free_completed pair shown as one event: the first).
  pack_column("ev.entry", [&](size_t, uint32_t r) { return int64_t{r} - first_row; });
  pack_column("ev.addr", [&](size_t, uint32_t r) { return t.addr[r]; });
  pack_column("ev.size", [&](size_t, uint32_t r) { return t.size[r]; });
  pack_column("ev.stream", [&](size_t, uint32_t r) { return int64_t{ann.stream(t.stream[r])}; });
  pack_column("ev.stack", [&](size_t, uint32_t r) { return int64_t{tables.stack(t.stack[r])}; });
  p.ints_of("ev.version", ev.version);
  // Times only move forward on the page (the allocator's clock is an
  // approximation); the tooltip shows the page time.
  EventsMeta meta;
  meta.t0 = n ? t.time_us[ev.row[0]] : 0;
  int64_t prev = meta.t0;
  pack_column("ev.dt", [&](size_t, uint32_t r) {
    int64_t now = t.time_us[r];
    if (now) meta.has_time = true;
    // Within 2^53 µs, the page adds the steps up exactly (in doubles).
    int64_t dt = std::clamp<int64_t>(now - prev, 0, int64_t{1} << 53);
    prev = std::max(prev, now);
    return dt;
  });
  pack_column("ev.cc",
              [&](size_t, uint32_t r) { return int64_t{tables.str(t.compile_context[r])}; });
  pack_column("ev.meta",
              [&](size_t, uint32_t r) { return int64_t{tables.str(t.user_metadata[r])}; });
  pack_column("ev.other", [&](size_t i, uint32_t r) -> int64_t {
    if (ev.action[i] == report::PageAction::Oom) ++meta.ooms;
    if (ev.action[i] != report::PageAction::Other) return 0;
    auto it = t.action_name.find(r);
    return it == t.action_name.end() ? 0 : tables.str(it->second);
  });
  return meta;
}

// Sources of timeline and state elements are snapshot-global indices in
// the engine; the page wants them device-relative.
struct LocalIndex {
  std::unordered_map<int64_t, int32_t> seg, blk;
  size_t blocks = 0;
};

void localize(std::vector<int32_t>& src, const std::unordered_map<int64_t, int32_t>& m) {
  for (int32_t& s : src)
    if (s < 0) s = ~m.at(~s);
}

// Snapshot segments and blocks of this device (block ranges made
// device-relative).
LocalIndex pack_segments(DeviceColumns& p, PageTables& tables, const Snapshot& snap,
                         const report::Annotated& ann, size_t d) {
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
  p.f64("seg.addr", std::move(saddr));
  p.ints("seg.size", std::move(ssize));
  p.ints("seg.stream", std::move(sstream));
  p.ints("seg.version", std::move(sver));
  p.ints("seg.stack", std::move(sstack));
  p.ints("seg.pool0", std::move(spool0));
  p.ints("seg.pool1", std::move(spool1));
  p.ints("seg.expandable", std::move(sexp));
  p.ints("seg.type", std::move(stype));
  p.ints("seg.allocated", std::move(salloc));
  p.ints("seg.active", std::move(sactive));
  p.ints("seg.requested", std::move(sreq));
  p.ints("seg.bbegin", std::move(sbb));
  p.ints("seg.bend", std::move(sbe));
  const size_t blocks = baddr.size();
  p.f64("blk.addr", std::move(baddr));
  p.ints("blk.size", std::move(bsize));
  p.ints("blk.req", std::move(breq));
  p.ints("blk.state", std::move(bstate));
  p.ints("blk.sname", std::move(bname));
  p.ints("blk.version", std::move(bver));
  p.ints("blk.stack", std::move(bstack));

  LocalIndex local;
  for (size_t i = 0; i < sglobal.size(); ++i) local.seg[sglobal[i]] = static_cast<int32_t>(i);
  for (size_t i = 0; i < bglobal.size(); ++i) local.blk[bglobal[i]] = static_cast<int32_t>(i);
  local.blocks = blocks;
  return local;
}

// The allocator state at each checkpoint (the state view's starting points).
report::StateCheckpoints pack_state(DeviceColumns& p, const Snapshot& snap,
                                    const report::Annotated& ann, size_t d,
                                    const LocalIndex& local) {
  report::StateCheckpoints sc = report::build_state_checkpoints(
      snap, ann, d, report::checkpoint_interval(ann.events[d].row.size()));
  localize(sc.seg_src, local.seg);
  localize(sc.blk_src, local.blk);
  p.ints_of("sc.soff", sc.seg_off);
  p.f64("sc.saddr", std::move(sc.seg_addr));
  p.f64("sc.ssize", std::move(sc.seg_size));
  p.ints_of("sc.ssrc", sc.seg_src);
  p.ints_of("sc.boff", sc.blk_off);
  p.ints_of("sc.bsrc", sc.blk_src);
  p.ints_of("sc.bflag", sc.blk_flag);
  return sc;
}

// record_function scopes and other annotations, drawn on the timelines;
// returns how many.
size_t pack_annotations(DeviceColumns& p, PageTables& tables, const Snapshot& snap, size_t d) {
  report::AnnotationRanges an = report::annotation_ranges(snap, d);
  std::vector<int64_t> an_name(an.name.size());
  for (size_t i = 0; i < an.name.size(); ++i) an_name[i] = tables.text(an.name[i]);
  p.ints("an.name", std::move(an_name));
  p.ints("an.start", std::move(an.start));
  p.ints("an.end", std::move(an.end));
  return an.name.size();
}

}  // namespace

std::string pack_device(DeviceColumns& p, PageTables& tables, const Snapshot& snap,
                        const report::Annotated& ann, size_t d, PhaseTimer& phase) {
  p.begin_device();
  EventsMeta events = pack_events(p, tables, snap, ann, d);
  phase("events");
  LocalIndex local = pack_segments(p, tables, snap, ann, d);
  phase("segments");
  report::Timeline tl = report::build_timeline(snap, ann, d, false);
  const std::string categories = pack_categories(p, snap, ann, d, tl);
  localize(tl.src, local.blk);
  phase("timeline");
  pack_timeline(p, "tl.", tl);
  phase("pack tl");
  report::Timeline st = report::build_timeline(snap, ann, d, true);
  localize(st.src, local.seg);
  pack_timeline(p, "st.", st);
  phase("segments tl");
  report::StateCheckpoints sc = pack_state(p, snap, ann, d, local);
  phase("state cps");
  pack_flame(p, tables, "fm.", report::build_flame_tree(snap, ann, d, false));
  pack_flame(p, tables, "fs.", report::build_flame_tree(snap, ann, d, true));
  size_t annotations = pack_annotations(p, tables, snap, d);

  size_t free_only = 0;
  for (auto k : tl.kind) free_only += k == report::ElementKind::FreeOnly;
  auto [rb, re] =
      d < snap.device_count() ? snap.device_rows(d) : std::pair<uint32_t, uint32_t>{0, 0};
  std::string out;
  JsonWriter w(out);
  w.begin_object()
      .field("index", d)
      .field("events", ann.events[d].row.size())
      .field("entries", re - rb)
      .field("segments", ann.segments[d].size())
      .field("blocks", local.blocks)
      .field("t0", events.t0)
      .field("hasTime", events.has_time)
      .field("ooms", events.ooms)
      .field("freeOnly", free_only)
      .field("annotations", annotations);
  timeline_meta(w, "tl", tl);
  w.raw_field("cat", categories);
  timeline_meta(w, "st", st);
  w.key("sc")
      .begin_object()
      .field("interval", sc.cp_interval)
      .field("count", sc.seg_off.size() - 1)
      .end_object()
      .end_object();
  return out;
}

}  // namespace memsight::report
