// The allocator as a device's trace began (see trace_start.h).
#include "allocator/trace_start.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "allocator/address_map.h"

namespace memsight::alloc {
namespace {

using Range = TraceStart::Range;

// Segments by address while the trace's segment events are undone. Mapped
// ranges of expandable segments merge when they touch, as torch reports them.
class RangeSet {
 public:
  std::map<int64_t, Range> ranges;

  void add(Range r) {
    if (r.size <= 0) return;
    if (r.expandable) {
      auto next = ranges.find(r.end());
      if (next != ranges.end() && next->second.expandable && next->second.small == r.small) {
        r.size += next->second.size;
        ranges.erase(next);
      }
      auto it = ranges.lower_bound(r.start);
      if (it != ranges.begin()) {
        auto prev = std::prev(it);
        if (prev->second.expandable && prev->second.small == r.small &&
            prev->second.end() == r.start) {
          prev->second.size += r.size;
          return;
        }
      }
    }
    ranges[r.start] = r;
  }
  // Takes [start, start + size) away, splitting a range that holds it.
  void remove(int64_t start, int64_t size) {
    int64_t end = start + size;
    auto it = ranges.upper_bound(start);
    if (it != ranges.begin()) --it;
    while (it != ranges.end() && it->second.start < end) {
      Range r = it->second;
      if (r.end() <= start) {
        ++it;
        continue;
      }
      it = ranges.erase(it);
      if (r.start < start) {
        Range left = r;
        left.size = start - r.start;
        ranges[left.start] = left;
      }
      if (end < r.end()) {
        Range right = r;
        right.start = end;
        right.size = r.end() - end;
        it = std::next(ranges.emplace(right.start, right).first);
      }
    }
  }
};

bool is_alloc_event(Action a) {
  return a == Action::Alloc || a == Action::FreeRequested || a == Action::FreeCompleted;
}
// Segment events are the four actions from SegmentAlloc to SegmentUnmap.
static_assert(static_cast<int>(Action::SegmentFree) == static_cast<int>(Action::SegmentAlloc) + 1 &&
              static_cast<int>(Action::SegmentMap) == static_cast<int>(Action::SegmentAlloc) + 2 &&
              static_cast<int>(Action::SegmentUnmap) == static_cast<int>(Action::SegmentAlloc) + 3);
bool is_segment_event(Action a) {
  return static_cast<uint8_t>(static_cast<uint8_t>(a) -
                              static_cast<uint8_t>(Action::SegmentAlloc)) < 4;
}

// The rows of [begin, end) holding segment events: a few among many, so
// the actions are tested 64 at a time (a loop the compiler vectorises).
std::vector<uint32_t> segment_rows(const Action* action, uint32_t begin, uint32_t end) {
  std::vector<uint32_t> rows;
  for (uint32_t r = begin; r < end;) {
    uint32_t stop = end - r > 64 ? r + 64 : end;
    unsigned any = 0;
    for (uint32_t k = r; k < stop; ++k) any |= is_segment_event(action[k]);
    for (; any && r < stop; ++r)
      if (is_segment_event(action[r])) rows.push_back(r);
    r = stop;
  }
  return rows;
}

// Which pool an expandable segment event belongs to when the snapshot does
// not say: a small pool maps one 2 MiB page at a time, a large pool 20 MiB
// pages; an unmap takes the kind of the nearest mapping of its stream.
class ExpandableKinds {
 public:
  void note(int64_t stream, int64_t addr, bool small) { known_.push_back({stream, addr, small}); }
  void sort() { std::sort(known_.begin(), known_.end()); }
  bool small(int64_t stream, int64_t addr, int64_t size, bool is_map) const {
    if (is_map || size % kLargeBuffer != 0) return size % kLargeBuffer != 0;
    const Known* best = nullptr;
    for (const Known& k : known_)
      if (k.stream == stream && (!best || dist(k.addr, addr) < dist(best->addr, addr))) best = &k;
    return best && best->small;
  }

 private:
  struct Known {
    int64_t stream, addr;
    bool small;
    bool operator<(const Known& o) const {
      return stream != o.stream ? stream < o.stream : addr < o.addr;
    }
  };
  static uint64_t dist(int64_t a, int64_t b) {
    return a > b ? static_cast<uint64_t>(a - b) : static_cast<uint64_t>(b - a);
  }
  std::vector<Known> known_;
};

}  // namespace

const Range* TraceStart::final_range_at(int64_t addr) const {
  auto it = std::upper_bound(final_ranges.begin(), final_ranges.end(), addr,
                             [](int64_t a, const Range& r) { return a < r.start; });
  if (it == final_ranges.begin()) return nullptr;
  --it;
  return addr < it->end() ? &*it : nullptr;
}

uint16_t TraceStart::pool_of(CachingAllocator& a, int64_t addr, int64_t size,
                             bool expandable) const {
  bool small = expandable ? size % kLargeBuffer != 0 : size == kSmallBuffer;
  const Range* r = final_range_at(addr);
  if (r && r->small == small && r->expandable == expandable && (expandable || r->start == addr))
    return a.pool_of(small, r->pool_id[0], r->pool_id[1]);
  return a.pool_of(small, 0, 0);
}

TraceStart trace_start(const Snapshot& snap, size_t device, const Settings& s,
                       int64_t device_total) {
  TraceStart ts;
  const TraceTable& t = snap.trace;
  if (device < snap.device_count()) std::tie(ts.begin, ts.end) = snap.device_rows(device);
  auto dev = static_cast<int64_t>(device);
  (void)s;
  // torch reserves 1 1/8 of the device's memory of address space per
  // expandable segment; 80 GiB when the device is unknown.
  int64_t total = device_total > 0 ? device_total : int64_t{80} << 30;
  ts.space_size = (total + total / 8 + kLargeBuffer - 1) / kLargeBuffer * kLargeBuffer;

  RangeSet segs;
  ExpandableKinds kinds;
  for (const Segment& sg : snap.segments) {
    if (sg.device != dev) continue;
    Range r{sg.address,       sg.total_size,
            sg.stream,        snap.str(sg.segment_type) == "small",
            sg.is_expandable, {sg.pool_id[0], sg.pool_id[1]}};
    ts.final_ranges.push_back(r);
    segs.add(r);
    if (r.expandable) kinds.note(r.stream, r.start, r.small);
    for (const memsight::Block& b : snap.segment_blocks(sg))
      if (b.state == BlockState::ActiveAllocated || b.state == BlockState::ActivePendingFree)
        ts.final_live[b.address] = {b.size, b.requested_size, b.stack,
                                    b.state == BlockState::ActivePendingFree};
  }
  std::sort(ts.final_ranges.begin(), ts.final_ranges.end(),
            [](const Range& x, const Range& y) { return x.start < y.start; });
  // Segment events are few: found once, so that the passes over them read
  // no other entry.
  const Action* action = t.action.data();
  ts.segment_rows = segment_rows(action, ts.begin, ts.end);
  for (uint32_t r : ts.segment_rows)
    if (t.action[r] == Action::SegmentMap)
      kinds.note(t.stream[r], t.addr[r], t.size[r] % kLargeBuffer != 0);
  kinds.sort();

  for (size_t k = ts.segment_rows.size(); k-- > 0;) {
    uint32_t r = ts.segment_rows[k];
    int64_t a = t.addr[r], sz = t.size[r];
    switch (t.action[r]) {
      case Action::SegmentAlloc:
      case Action::SegmentMap:
        segs.remove(a, sz);
        break;
      case Action::SegmentFree:
        segs.add({a, sz, t.stream[r], sz == kSmallBuffer, false, {0, 0}});
        break;
      case Action::SegmentUnmap:
        segs.add({a, sz, t.stream[r], kinds.small(t.stream[r], a, sz, false), true, {0, 0}});
        break;
      default:
        break;
    }
  }
  for (const auto& [start, r] : segs.ranges) ts.ranges.push_back(r);

  // Blocks live at the start: those the trace frees before allocating
  // them, and those live at the snapshot that no event touches. Each block
  // is a request: the trace's allocations in order, then the blocks live at
  // the start by address; a free names the request it ends.
  constexpr uint32_t kOrphan = 1u << 31;
  const uint32_t n = ts.end - ts.begin;
  ts.request.resize(n);  // every row is written below
  uint32_t* request = ts.request.data();
  const int64_t *addr_of = t.addr.data() + ts.begin, *stream_of = t.stream.data() + ts.begin;
  const Action* action_of = action + ts.begin;
  AddressMap<uint32_t> live_now;  // address -> request
  AddressMap<uint8_t> final_touched;
  for (const auto& [addr, fb] : ts.final_live) final_touched[addr] = 0;
  std::vector<uint32_t> orphan_rows;  // rows naming an orphan (provisional ids)
  std::vector<int64_t> streams;
  int64_t last_stream = INT64_MIN;
  uint32_t allocs = 0;
  for (uint32_t e = 0; e < n; ++e) {
    if (stream_of[e] != last_stream) streams.push_back(last_stream = stream_of[e]);
    Action a = action_of[e];
    if (!is_alloc_event(a)) {
      request[e] = TraceStart::kNoRequest;
      continue;
    }
    int64_t addr = addr_of[e];
    if (a == Action::Alloc) {
      live_now[addr] = request[e] = allocs++;
      if (uint8_t* f = final_touched.find(addr)) *f = 1;
      continue;
    }
    uint32_t* q = live_now.find(addr);
    if (!q) {  // freed before it was allocated: live at the start
      TraceStart::Live l;
      l.addr = addr;
      l.requested = t.size[ts.begin + e];
      l.size = round_size(s, l.requested);  // estimated: its allocation is not in the trace
      l.pending = a == Action::FreeCompleted;
      l.estimated = true;
      l.request = kOrphan | static_cast<uint32_t>(ts.live.size());
      ts.live.push_back(l);
      q = &(live_now[addr] = l.request);
      if (uint8_t* f = final_touched.find(addr)) *f = 1;
    }
    request[e] = *q;
    if (*q & kOrphan) orphan_rows.push_back(e);
    // A plain free: free_requested, then at once its free_completed.
    if (a == Action::FreeRequested && e + 1 < n && action_of[e + 1] == Action::FreeCompleted &&
        addr_of[e + 1] == addr) {
      request[++e] = *q;
      if (*q & kOrphan) orphan_rows.push_back(e);
      a = Action::FreeCompleted;
    }
    if (a == Action::FreeCompleted) live_now.erase(addr);
  }
  ts.allocs = allocs;
  ts.estimated = static_cast<int64_t>(ts.live.size());
  for (const auto& [addr, fb] : ts.final_live)
    if (!*final_touched.find(addr))
      ts.live.push_back({addr, fb.size, fb.requested, fb.stack, fb.pending, false, 0});
  // Stable: the trace can free one address before allocating it several
  // times (a wrapped history); those blocks keep the trace's order, on every
  // standard library (std::sort orders ties differently in libc++, which the
  // standalone viewer's engine uses, and the replay then differs).
  std::stable_sort(
      ts.live.begin(), ts.live.end(),
      [](const TraceStart::Live& x, const TraceStart::Live& y) { return x.addr < y.addr; });
  std::vector<uint32_t> renumber(static_cast<size_t>(ts.estimated));
  for (uint32_t k = 0; k < ts.live.size(); ++k) {
    if (ts.live[k].request & kOrphan) renumber[ts.live[k].request & ~kOrphan] = allocs + k;
    ts.live[k].request = allocs + k;
  }
  for (uint32_t row : orphan_rows) ts.request[row] = renumber[ts.request[row] & ~kOrphan];
  ts.requests = allocs + static_cast<uint32_t>(ts.live.size());

  for (const Range& r : ts.ranges) streams.push_back(r.stream);
  for (const Range& r : ts.final_ranges) streams.push_back(r.stream);
  std::sort(streams.begin(), streams.end());
  streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
  ts.streams = std::move(streams);
  return ts;
}

void load_start(CachingAllocator& a, const Snapshot& snap, const TraceStart& ts,
                const std::function<void(uint32_t, const TraceStart::Live&)>& on_live) {
  const TraceTable& t = snap.trace;
  // Address spaces of expandable segments: one per pool and stream, from
  // the lowest address mapped in it (at the start or later).
  struct Seen {
    uint16_t pool, stream;
    int64_t addr, end;
  };
  std::vector<Seen> seen;
  for (const Range& r : ts.ranges)
    if (r.expandable)
      seen.push_back(
          {a.pool_of(r.small, r.pool_id[0], r.pool_id[1]), ts.rank(r.stream), r.start, r.end()});
  for (uint32_t r : ts.segment_rows)
    if (t.action[r] == Action::SegmentMap)
      seen.push_back({ts.pool_of(a, t.addr[r], t.size[r], true), ts.rank(t.stream[r]), t.addr[r],
                      t.addr[r] + t.size[r]});
  std::sort(seen.begin(), seen.end(), [](const Seen& x, const Seen& y) {
    if (x.pool != y.pool) return x.pool < y.pool;
    return x.stream != y.stream ? x.stream < y.stream : x.addr < y.addr;
  });
  for (size_t i = 0; i < seen.size();) {
    size_t j = i;
    int64_t base = seen[i].addr, end = seen[i].end;
    while (j < seen.size() && seen[j].pool == seen[i].pool && seen[j].stream == seen[i].stream &&
           seen[j].addr < base + ts.space_size)
      end = std::max(end, seen[j++].end);
    a.add_space(base, std::max(ts.space_size, end - base), seen[i].pool, seen[i].stream);
    i = j;
  }

  // Segments, each one free block to begin with.
  std::map<int64_t, uint32_t> free_at;
  for (const Range& r : ts.ranges) {
    uint16_t pool = a.pool_of(r.small, r.pool_id[0], r.pool_id[1]);
    if (const Range* f = ts.final_range_at(r.start);
        f && !(f->pool_id[0] == 0 && f->pool_id[1] == 0))
      pool = a.pool_of(r.small, f->pool_id[0], f->pool_id[1]);
    uint16_t stream = ts.rank(r.stream);
    uint32_t b = kNone;
    if (r.expandable) {
      uint32_t u = a.unmapped_at(pool, stream, r.start);
      if (u != kNone && r.end() <= a.blocks[u].addr + a.blocks[u].size)
        b = a.map(u, r.start, r.size);
    }
    if (b == kNone) b = a.add_segment(r.start, r.size, pool, stream);
    free_at[a.blocks[b].addr] = b;
  }

  // Live blocks, carved at their addresses.
  for (const TraceStart::Live& l : ts.live) {
    uint32_t b = kNone;
    auto it = free_at.upper_bound(l.addr);
    if (it != free_at.begin()) {
      --it;
      uint32_t f = it->second;
      const Block& fb = a.blocks[f];
      if (fb.mergeable() && fb.mapped && l.addr + l.size <= fb.addr + fb.size) {
        if (l.addr > fb.addr) f = a.split_free(f, l.addr);  // the front stays free
        free_at.erase(l.addr);
        bool split = a.blocks[f].size > l.size;
        b = a.carve(f, l.size, l.requested, split);
        if (split) free_at[a.blocks[f].addr] = f;
      }
    }
    if (b == kNone) b = a.add_detached(l.addr, l.size, l.requested, 0);
    if (l.pending) a.free_requested(b);
    on_live(b, l);
  }
  a.peak = a.now;
  a.peak_requested = a.now.requested;
}

}  // namespace memsight::alloc
