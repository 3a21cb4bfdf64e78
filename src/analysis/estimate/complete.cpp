// A requests-only history made whole from its simulated run (complete.h).
// Key orders are torch's (from_raw.cpp says them): a segment event is
// written with the keys of the request it served, an oom entry with
// device_free in place of addr.
#include "analysis/estimate/complete.h"

#include <algorithm>
#include <unordered_map>

#include "memsight/error.h"
#include "model/torch_shapes.h"

namespace memsight::estimate {
namespace {

using alloc::DeviceTrace;

bool about_a_block(Action a) {
  return a == Action::Alloc || a == Action::FreeRequested || a == Action::FreeCompleted;
}

// The oom entry's keys: those of the request that failed, with device_free
// in place of addr (and no keys beyond torch's).
class OomShapes {
 public:
  explicit OomShapes(Snapshot& out) : out_(out) {}
  ShapeId of(ShapeId request) {
    if (auto it = done_.find(request); it != done_.end()) return it->second;
    std::vector<ShapeKey> keys;
    for (ShapeKey k : out_.shapes.get(request)) {
      if (k.field == Field::Extra) continue;
      if (k.field == Field::Addr) k.key = out_.strings.intern(kDeviceFreeKey);
      keys.push_back(k);
    }
    return done_[request] = out_.shapes.intern(keys);
  }

 private:
  Snapshot& out_;
  std::unordered_map<ShapeId, ShapeId> done_;
};

// The alloc entry (within the device) of each request.
std::vector<int32_t> alloc_rows(const Snapshot& in, const DeviceTrace& dt) {
  std::vector<int32_t> rows(dt.requests, -1);
  for (uint32_t i = 0; i < dt.end - dt.begin; ++i)
    if (in.trace.action[dt.begin + i] == Action::Alloc && dt.request[i] != DeviceTrace::kNoRequest)
      rows[dt.request[i]] = static_cast<int32_t>(i);
  return rows;
}

// One device's completed trace (see complete.h).
void complete_device(const Snapshot& in, DeviceRun& run, OomShapes& oom_shapes, Snapshot& out) {
  TraceTable& t = out.trace;
  const DeviceTrace& dt = run.plan.trace;
  const std::vector<simulate::SegmentEvent>& events = run.result.events;
  const int32_t stop = run.result.stopped_at;
  size_t ev = 0;
  for (uint32_t i = 0; i < dt.end - dt.begin; ++i) {
    const uint32_t r = dt.begin + i;
    // The segment events a request took come right before it, as torch
    // records them (in the request's context: its stack, its time).
    for (; ev < events.size() && events[ev].owner == static_cast<int32_t>(i); ++ev) {
      const auto to = static_cast<uint32_t>(t.rows());
      t.append_row(in.trace, r);
      t.action[to] = events[ev].action;
      t.addr[to] = events[ev].addr;
      t.size[to] = events[ev].size;
    }
    const auto to = static_cast<uint32_t>(t.rows());
    t.append_row(in.trace, r);
    if (static_cast<int32_t>(i) == stop) {
      const simulate::Oom& o = run.result.ooms.back();
      const simulate::Device& m = run.memory;
      run.device_free = m.capacity >= 0 ? std::max<int64_t>(0, m.capacity - o.reserved) : 0;
      t.action[to] = Action::Oom;
      t.addr[to] = run.device_free;
      t.size[to] = o.requested;
      t.shape[to] = oom_shapes.of(t.shape[to]);
      t.extras.erase(to);
      run.oom_row = to - out.device_begin.back();
      break;
    }
    const uint32_t request = dt.request[i];
    if (request != DeviceTrace::kNoRequest && about_a_block(t.action[to]) &&
        run.trail.addresses[request] >= 0)
      t.addr[to] = run.trail.addresses[request];
  }
  if (ev != events.size() && stop < 0)
    throw Error("internal error: a simulated segment event served no trace entry");
}

// The blocks live as the run ended, by their address in the history.
void live_blocks(const Snapshot& in, DeviceRun& run) {
  const std::vector<int32_t> rows = alloc_rows(in, run.plan.trace);
  for (const alloc::Block& x : run.trail.end->blocks) {
    if (!x.used || !(x.allocated || x.pending) || x.tag == alloc::kNone || x.tag >= rows.size() ||
        rows[x.tag] < 0)
      continue;
    const int64_t fake = in.trace.addr[run.plan.trace.begin + rows[x.tag]];
    run.live[fake] = {fake + x.size, x.addr};
  }
}

}  // namespace

Snapshot copy_tables(const Snapshot& in) {
  Snapshot out;
  for (size_t id = 1; id < in.strings.size(); ++id)
    if (out.strings.intern(in.str(static_cast<StrId>(id))) != id)
      throw Error("internal error: the snapshot's strings are not distinct");
  out.frames = in.frames;
  out.shapes = in.shapes;
  out.extras = in.extras;
  out.top_level = in.top_level;
  out.top_keys = in.top_keys;
  return out;
}

void complete_trace(const Snapshot& in, std::vector<DeviceRun>& runs, Snapshot& out) {
  OomShapes oom_shapes(out);
  out.trace.reserve(in.trace.rows() + in.trace.rows() / 8);
  out.device_begin.assign(1, 0);
  for (size_t d = 0; d < in.device_count(); ++d) {
    auto run =
        std::find_if(runs.begin(), runs.end(), [&](const DeviceRun& x) { return x.device == d; });
    if (run != runs.end()) {
      complete_device(in, *run, oom_shapes, out);
      live_blocks(in, *run);
    } else {
      for (uint32_t r = in.device_rows(d).first; r < in.device_rows(d).second; ++r)
        out.trace.append_row(in.trace, r);
    }
    out.device_begin.push_back(static_cast<uint32_t>(out.trace.rows()));
  }
}

namespace {

// Where torch reports a segment: at each block that starts a mapped range
// (a cudaMalloc'd segment's first block, or an expandable segment's first
// mapped block after unmapped pages).
bool starts_segment(const alloc::CachingAllocator& a, const alloc::Block& x) {
  return x.used && x.mapped && !x.detached && (x.prev == alloc::kNone || !a.blocks[x.prev].mapped);
}

class SegmentWriter {
 public:
  explicit SegmentWriter(Snapshot& out) : out_(out), t_(out) {}

  void device(const Snapshot& in, const DeviceRun& run) {
    const alloc::CachingAllocator& a = *run.trail.end;
    const std::vector<int32_t> rows = alloc_rows(in, run.plan.trace);
    // Each segment's stack: that of the event that made it.
    std::unordered_map<int64_t, StackId> made;
    const auto [begin, end] = out_.device_rows(run.device);
    for (uint32_t r = begin; r < end; ++r)
      if (out_.trace.action[r] == Action::SegmentAlloc ||
          out_.trace.action[r] == Action::SegmentMap)
        made[out_.trace.addr[r]] = out_.trace.stack[r];
    std::vector<uint32_t> heads;
    for (uint32_t b = 0; b < a.blocks.size(); ++b)
      if (starts_segment(a, a.blocks[b])) heads.push_back(b);
    std::sort(heads.begin(), heads.end(),
              [&](uint32_t x, uint32_t y) { return a.blocks[x].addr < a.blocks[y].addr; });
    for (uint32_t h : heads) {
      const alloc::Block& x = a.blocks[h];
      Segment s;
      s.device = static_cast<int64_t>(run.device);
      s.address = x.addr;
      const std::vector<int64_t>& streams = run.plan.trace.index.streams;
      s.stream = x.stream < streams.size() ? streams[x.stream] : 0;
      const alloc::Pool& pool = a.pools[x.pool];
      s.segment_type = pool.small ? t_.small : t_.large;
      s.pool_id[0] = pool.id[0];
      s.pool_id[1] = pool.id[1];
      s.is_expandable = x.va != 0;
      if (auto it = made.find(x.addr); it != made.end()) s.stack = it->second;
      s.shape = s.stack ? t_.with_stack : t_.without_stack;
      s.block_begin = static_cast<uint32_t>(out_.blocks.size());
      for (uint32_t c = h; c != alloc::kNone && a.blocks[c].mapped; c = a.blocks[c].next)
        add_block(in, run, rows, a.blocks[c], s);
      s.block_end = static_cast<uint32_t>(out_.blocks.size());
      out_.segments.push_back(s);
    }
  }

 private:
  void add_block(const Snapshot& in, const DeviceRun& run, const std::vector<int32_t>& rows,
                 const alloc::Block& x, Segment& s) {
    Block b;
    b.address = x.addr;
    b.size = x.size;
    b.requested_size = x.requested;
    b.shape = t_.block;
    const int state = x.allocated ? 0 : x.pending ? 1 : 2;
    b.state = state == 0   ? BlockState::ActiveAllocated
              : state == 1 ? BlockState::ActivePendingFree
                           : BlockState::Inactive;
    b.state_name = t_.states[state];
    if (state < 2 && x.tag < rows.size() && rows[x.tag] >= 0)
      b.stack = in.trace.stack[run.plan.trace.begin + rows[x.tag]];
    s.total_size += x.size;
    if (x.allocated) s.allocated_size += x.size;
    if (state < 2) s.active_size += x.size, s.requested_size += x.requested;
    out_.blocks.push_back(b);
  }

  Snapshot& out_;
  TorchSegmentShapes t_;
};

}  // namespace

void complete_segments(const Snapshot& in, const std::vector<DeviceRun>& runs, Snapshot& out) {
  SegmentWriter w(out);
  for (const DeviceRun& run : runs) w.device(in, run);
}

}  // namespace memsight::estimate
