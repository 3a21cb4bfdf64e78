// Events and timelines of the report page: torch's annotate_snapshot and
// process_alloc_data (MemoryViz.js), restated over the columnar model. The
// browser only draws what these produce, so its work per frame stays
// proportional to what is on screen.
#include "report/page_data.h"

#include <algorithm>
#include <limits>

namespace memsight::report {
namespace {

// torch's version_space: a reuse counter per address.
class VersionSpace {
 public:
  uint32_t get(int64_t addr, bool increment) {
    auto [it, _] = counts_.try_emplace(addr, 0);
    return increment ? it->second++ : it->second;
  }

 private:
  std::unordered_map<int64_t, uint32_t> counts_;
};

PageAction page_action(Action a) {
  switch (a) {
    case Action::Alloc:
      return PageAction::Alloc;
    case Action::FreeRequested:
      return PageAction::FreeRequested;
    case Action::FreeCompleted:
      return PageAction::FreeCompleted;
    case Action::SegmentAlloc:
      return PageAction::SegmentAlloc;
    case Action::SegmentFree:
      return PageAction::SegmentFree;
    case Action::SegmentMap:
      return PageAction::SegmentMap;
    case Action::SegmentUnmap:
      return PageAction::SegmentUnmap;
    case Action::Snapshot:
      return PageAction::Snapshot;
    case Action::Oom:
      return PageAction::Oom;
    default:
      return PageAction::Other;
  }
}

}  // namespace

uint32_t checkpoint_interval(size_t events) {
  size_t c = std::max<size_t>(2048, (events + 255) / 256);
  return static_cast<uint32_t>(c);
}

size_t checkpoint_budget(size_t events) { return std::max<size_t>(size_t{1} << 16, 4 * events); }

Annotated annotate(const Snapshot& snap) {
  Annotated ann;
  size_t devices = snap.device_count();
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && s.device < 4096) devices = std::max<size_t>(devices, s.device + 1);
  // A snapshot with nothing at all still gets one (empty) device to show.
  devices = std::max<size_t>(devices, 1);
  ann.devices = devices;
  ann.events.resize(devices);
  ann.segments.resize(devices);
  ann.stream_raw.push_back(0);
  ann.stream_no[0] = 0;
  auto stream = [&](int64_t raw) {
    auto [it, inserted] =
        ann.stream_no.try_emplace(raw, static_cast<uint32_t>(ann.stream_raw.size()));
    if (inserted) ann.stream_raw.push_back(raw);
  };
  VersionSpace block_v, segment_v;
  const TraceTable& t = snap.trace;
  for (size_t d = 0; d < snap.device_count(); ++d) {
    auto [begin, end] = snap.device_rows(d);
    DeviceEvents& ev = ann.events[d];
    ev.row.reserve(end - begin);
    ev.action.reserve(end - begin);
    ev.version.reserve(end - begin);
    for (uint32_t r = begin; r < end; ++r) {
      stream(t.stream[r]);
      PageAction a = page_action(t.action[r]);
      int64_t addr = t.addr[r];
      uint32_t v = 0;
      switch (a) {
        case PageAction::FreeCompleted:
          v = block_v.get(addr, true);
          // The pair free_requested + free_completed of one block reads as one "free".
          if (!ev.action.empty() && ev.action.back() == PageAction::FreeRequested &&
              t.addr[ev.row.back()] == addr) {
            ev.action.back() = PageAction::Free;
            continue;
          }
          break;
        case PageAction::FreeRequested:
        case PageAction::Alloc:
          v = block_v.get(addr, false);
          break;
        case PageAction::SegmentFree:
        case PageAction::SegmentUnmap:
          v = segment_v.get(addr, true);
          break;
        case PageAction::SegmentAlloc:
        case PageAction::SegmentMap:
          v = segment_v.get(addr, false);
          break;
        default:
          break;
      }
      ev.row.push_back(r);
      ev.action.push_back(a);
      ev.version.push_back(v);
    }
  }
  ann.segment_version.resize(snap.segments.size());
  ann.block_version.resize(snap.blocks.size());
  for (size_t i = 0; i < snap.segments.size(); ++i) {
    const Segment& s = snap.segments[i];
    stream(s.stream);
    ann.segment_version[i] = segment_v.get(s.address, false);
    for (uint32_t b = s.block_begin; b < s.block_end; ++b)
      ann.block_version[b] = block_v.get(snap.blocks[b].address, false);
    if (s.device >= 0 && static_cast<size_t>(s.device) < devices)
      ann.segments[s.device].push_back(static_cast<uint32_t>(i));
  }
  return ann;
}

namespace {

// An element of process_alloc_data's scan, in MemoryViz's element order
// (tidx).
struct ScanElement {
  ElementKind kind;
  int32_t src, end;
  double size;
};

struct Scan {
  std::vector<ScanElement> el;
  std::vector<uint32_t> initial;                  // in the order MemoryViz collects them
  std::unordered_map<int64_t, uint32_t> pending;  // address -> allocation not freed yet
};

// process_alloc_data's scan over the device's events: an allocation and its
// free make one element; a free with no allocation, one live from the start.
Scan scan_events(const Snapshot& snap, const DeviceEvents& ev, bool segments) {
  const TraceTable& t = snap.trace;
  const size_t n = ev.row.size();
  const PageAction alloc_action = segments ? PageAction::SegmentAlloc : PageAction::Alloc;
  Scan scan;
  auto& [el, initial, pending] = scan;
  for (size_t i = 0; i < n; ++i) {
    PageAction a = ev.action[i];
    bool is_free = segments ? a == PageAction::SegmentFree
                            : (a == PageAction::Free || a == PageAction::FreeCompleted);
    if (a != alloc_action && !is_free) continue;
    uint32_t r = ev.row[i];
    int64_t addr = t.addr[r];
    auto ei = static_cast<int32_t>(i);
    if (a == alloc_action) {
      pending[addr] = static_cast<uint32_t>(el.size());
      el.push_back({ElementKind::Alloc, ei, -1, static_cast<double>(t.size[r])});
    } else if (auto it = pending.find(addr); it != pending.end()) {
      el[it->second].end = ei;
      pending.erase(it);
    } else {
      initial.push_back(static_cast<uint32_t>(el.size()));
      el.push_back({ElementKind::FreeOnly, ei, ei, static_cast<double>(t.size[r])});
    }
  }
  return scan;
}

// What the snapshot holds that the trace never allocated.
void add_snapshot_live(Scan& scan, const Snapshot& snap, const Annotated& ann, size_t device,
                       bool segments) {
  auto& [el, initial, pending] = scan;
  for (uint32_t si : ann.segments[device]) {
    const Segment& s = snap.segments[si];
    if (segments) {
      if (pending.count(s.address)) continue;
      initial.push_back(static_cast<uint32_t>(el.size()));
      el.push_back(
          {ElementKind::Live, ~static_cast<int32_t>(si), -1, static_cast<double>(s.total_size)});
      continue;
    }
    for (uint32_t b = s.block_begin; b < s.block_end; ++b) {
      const Block& blk = snap.blocks[b];
      if (blk.state != BlockState::ActiveAllocated || pending.count(blk.address)) continue;
      initial.push_back(static_cast<uint32_t>(el.size()));
      el.push_back({ElementKind::Live, ~static_cast<int32_t>(b), -1,
                    static_cast<double>(blk.requested_size)});
    }
  }
}

// Stacking order: the initially live ones bottom up in reverse collection
// order (MemoryViz reverses the list), then the allocations in trace order.
Timeline stack_elements(const Scan& scan) {
  const auto& el = scan.el;
  const auto& initial = scan.initial;
  Timeline tl;
  const size_t m = el.size();
  tl.kind.reserve(m);
  tl.src.reserve(m);
  tl.end.reserve(m);
  tl.tidx.reserve(m);
  tl.size.reserve(m);
  auto push = [&](uint32_t k) {
    tl.kind.push_back(el[k].kind);
    tl.src.push_back(el[k].src);
    tl.end.push_back(el[k].end);
    tl.tidx.push_back(k);
    tl.size.push_back(el[k].size);
  };
  for (size_t k = initial.size(); k-- > 0;) push(initial[k]);
  tl.initial = static_cast<uint32_t>(initial.size());
  for (uint32_t k = 0; k < m; ++k)
    if (el[k].kind == ElementKind::Alloc) push(k);
  return tl;
}

// Level of detail: MemoryViz draws the largest elements (ties: lower index
// first, its sort being stable) and sums up the rest in one band.
void order_by_size(Timeline& tl) {
  const size_t m = tl.kind.size();
  tl.by_size.resize(m);
  for (uint32_t i = 0; i < m; ++i) tl.by_size[i] = i;
  std::sort(tl.by_size.begin(), tl.by_size.end(), [&](uint32_t a, uint32_t b) {
    if (tl.size[a] != tl.size[b]) return tl.size[a] > tl.size[b];
    return tl.tidx[a] < tl.tidx[b];
  });
}

// Every other checkpoint, at twice the interval: checkpoint k is the old
// 2k+1 (checkpoint_budget).
void keep_odd_checkpoints(Timeline& tl) {
  std::vector<uint32_t> ids, off{0};
  for (size_t k = 1; k + 1 < tl.cp_off.size(); k += 2) {
    ids.insert(ids.end(), tl.cp_ids.begin() + tl.cp_off[k], tl.cp_ids.begin() + tl.cp_off[k + 1]);
    off.push_back(static_cast<uint32_t>(ids.size()));
  }
  tl.cp_ids = std::move(ids);
  tl.cp_off = std::move(off);
  tl.cp_interval *= 2;
}

// Replay: which event starts or ends which element; the running total, its
// peak and envelope, and the live elements at each checkpoint.
void replay_timeline(Timeline& tl, size_t n, uint32_t interval) {
  const size_t m = tl.kind.size();
  std::vector<int32_t> code(n, 0);  // id+1: starts; -(id+1): ends
  for (uint32_t id = 0; id < m; ++id) {
    if (tl.kind[id] == ElementKind::Alloc) code[tl.src[id]] = static_cast<int32_t>(id) + 1;
    if (tl.end[id] >= 0) code[tl.end[id]] = -static_cast<int32_t>(id) - 1;
  }
  tl.cp_interval = interval ? interval : checkpoint_interval(n);
  const size_t budget = checkpoint_budget(n);
  tl.cp_off.push_back(0);
  tl.env_bucket = static_cast<uint32_t>(std::max<size_t>(1, (n + 4095) / 4096));
  constexpr uint32_t kDead = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> live, pos(m, kDead);
  size_t dead = 0;
  double total = 0;
  for (uint32_t id = 0; id < tl.initial; ++id) {
    pos[id] = static_cast<uint32_t>(live.size());
    live.push_back(id);
    total += tl.size[id];
  }
  tl.initial_total = tl.peak = total;
  auto compact = [&] {
    size_t w = 0;
    for (uint32_t id : live)
      if (id != kDead) {
        pos[id] = static_cast<uint32_t>(w);
        live[w++] = id;
      }
    live.resize(w);
    dead = 0;
  };
  double bmax = -1, bmin = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    if (int32_t c = code[i]; c > 0) {
      uint32_t id = c - 1;
      pos[id] = static_cast<uint32_t>(live.size());
      live.push_back(id);
      total += tl.size[id];
    } else if (c < 0) {
      uint32_t id = -c - 1;
      live[pos[id]] = kDead;
      pos[id] = kDead;
      total -= tl.size[id];
      if (++dead > 64 && dead * 2 > live.size()) compact();
    }
    if (total > tl.peak) {
      tl.peak = total;
      tl.peak_event = static_cast<int64_t>(i);
    }
    bmax = std::max(bmax, total);
    bmin = std::min(bmin, total);
    if ((i + 1) % tl.env_bucket == 0 || i + 1 == n) {
      tl.env_max.push_back(bmax);
      tl.env_min.push_back(bmin);
      bmax = -1;
      bmin = std::numeric_limits<double>::infinity();
    }
    if ((i + 1) % tl.cp_interval == 0 && i + 1 < n) {
      if (dead) compact();
      tl.cp_ids.insert(tl.cp_ids.end(), live.begin(), live.end());
      tl.cp_off.push_back(static_cast<uint32_t>(tl.cp_ids.size()));
      while (tl.cp_ids.size() > budget && tl.cp_off.size() > 1) keep_odd_checkpoints(tl);
    }
  }
  tl.final_total = total;
}

}  // namespace

Timeline build_timeline(const Snapshot& snap, const Annotated& ann, size_t device, bool segments,
                        uint32_t interval) {
  const DeviceEvents& ev = ann.events[device];
  Scan scan = scan_events(snap, ev, segments);
  add_snapshot_live(scan, snap, ann, device, segments);
  Timeline tl = stack_elements(scan);
  order_by_size(tl);
  replay_timeline(tl, ev.row.size(), interval);
  return tl;
}

}  // namespace memsight::report
