// The allocator as a device's trace began (see trace_start.h).
#include "allocator/trace_start.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace memsight::alloc {
namespace {

// Segments by address while the trace's segment events are undone. Mapped
// ranges of expandable segments merge when they touch, as torch reports them.
class RangeSet {
 public:
  std::map<int64_t, SegmentRange> ranges;

  void add(SegmentRange r) {
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
      SegmentRange r = it->second;
      if (r.end() <= start) {
        ++it;
        continue;
      }
      it = ranges.erase(it);
      if (r.start < start) {
        SegmentRange left = r;
        left.size = start - r.start;
        ranges[left.start] = left;
      }
      if (end < r.end()) {
        SegmentRange right = r;
        right.start = end;
        right.size = r.end() - end;
        it = std::next(ranges.emplace(right.start, right).first);
      }
    }
  }
};

// Segment events are the four actions from SegmentAlloc to SegmentUnmap.
static_assert(static_cast<int>(Action::SegmentFree) == static_cast<int>(Action::SegmentAlloc) + 1 &&
              static_cast<int>(Action::SegmentMap) == static_cast<int>(Action::SegmentAlloc) + 2 &&
              static_cast<int>(Action::SegmentUnmap) == static_cast<int>(Action::SegmentAlloc) + 3);
bool is_segment_event(Action a) {
  return static_cast<uint8_t>(static_cast<uint8_t>(a) -
                              static_cast<uint8_t>(Action::SegmentAlloc)) < 4;
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

// The address spaces of expandable segments: one per pool and stream, from
// the lowest address mapped in it (at the start or later).
void add_spaces(CachingAllocator& a, const TraceTable& t, const TraceStart& start,
                const StreamPoolIndex& index, const std::vector<uint32_t>& segment_rows) {
  struct Seen {
    uint16_t pool, stream;
    int64_t addr, end;
  };
  std::vector<Seen> seen;
  for (const SegmentRange& r : start.segments)
    if (r.expandable)
      seen.push_back(
          {a.pool_of(r.small, r.pool_id[0], r.pool_id[1]), index.rank(r.stream), r.start, r.end()});
  for (uint32_t r : segment_rows)
    if (t.action[r] == Action::SegmentMap)
      seen.push_back({index.pool_of(a, t.addr[r], t.size[r], true), index.rank(t.stream[r]),
                      t.addr[r], t.addr[r] + t.size[r]});
  std::sort(seen.begin(), seen.end(), [](const Seen& x, const Seen& y) {
    if (x.pool != y.pool) return x.pool < y.pool;
    return x.stream != y.stream ? x.stream < y.stream : x.addr < y.addr;
  });
  for (size_t i = 0; i < seen.size();) {
    size_t j = i;
    int64_t base = seen[i].addr, end = seen[i].end;
    while (j < seen.size() && seen[j].pool == seen[i].pool && seen[j].stream == seen[i].stream &&
           seen[j].addr < base + start.space_size)
      end = std::max(end, seen[j++].end);
    a.add_space(base, std::max(start.space_size, end - base), seen[i].pool, seen[i].stream);
    i = j;
  }
}

// The segments at the start, each one free block to begin with: the free
// blocks by address.
std::map<int64_t, uint32_t> add_segments(CachingAllocator& a, const TraceStart& start,
                                         const StreamPoolIndex& index) {
  std::map<int64_t, uint32_t> free_at;
  for (const SegmentRange& r : start.segments) {
    uint16_t pool = a.pool_of(r.small, r.pool_id[0], r.pool_id[1]);
    if (const SegmentRange* f = index.final_segment_at(r.start);
        f && !(f->pool_id[0] == 0 && f->pool_id[1] == 0))
      pool = a.pool_of(r.small, f->pool_id[0], f->pool_id[1]);
    uint16_t stream = index.rank(r.stream);
    uint32_t b = kNone;
    if (r.expandable) {
      uint32_t u = a.unmapped_at(pool, stream, r.start);
      if (u != kNone && r.end() <= a.blocks[u].addr + a.blocks[u].size)
        b = a.map(u, r.start, r.size);
    }
    if (b == kNone) b = a.add_segment(r.start, r.size, pool, stream);
    free_at[a.blocks[b].addr] = b;
  }
  return free_at;
}

}  // namespace

int64_t expandable_space_size(int64_t device_total) {
  int64_t total = device_total > 0 ? device_total : int64_t{80} << 30;
  return (total + total / 8 + kLargeBuffer - 1) / kLargeBuffer * kLargeBuffer;
}

// A few rows among many, so the actions are tested 64 at a time (a loop the
// compiler vectorises).
std::vector<uint32_t> segment_rows(const TraceTable& t, uint32_t begin, uint32_t end) {
  const Action* action = t.action.data();
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

std::vector<SegmentRange> segments_at_start(const TraceTable& t, const std::vector<uint32_t>& rows,
                                            const std::vector<SegmentRange>& final_segments) {
  RangeSet segs;
  ExpandableKinds kinds;
  for (const SegmentRange& r : final_segments) {
    segs.add(r);
    if (r.expandable) kinds.note(r.stream, r.start, r.small);
  }
  for (uint32_t r : rows)
    if (t.action[r] == Action::SegmentMap)
      kinds.note(t.stream[r], t.addr[r], t.size[r] % kLargeBuffer != 0);
  kinds.sort();
  for (size_t k = rows.size(); k-- > 0;) {
    uint32_t r = rows[k];
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
  std::vector<SegmentRange> out;
  out.reserve(segs.ranges.size());
  for (const auto& [start, r] : segs.ranges) out.push_back(r);
  return out;
}

void load_start(CachingAllocator& a, const TraceTable& t, const TraceStart& start,
                const StreamPoolIndex& index, const std::vector<uint32_t>& segment_rows,
                const std::function<void(uint32_t, const LiveBlock&)>& on_live) {
  add_spaces(a, t, start, index, segment_rows);
  std::map<int64_t, uint32_t> free_at = add_segments(a, start, index);
  // Live blocks, carved at their addresses.
  for (const LiveBlock& l : start.live) {
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

bool allocations_only(const TraceTable& t, uint32_t begin, uint32_t end) {
  for (uint32_t i = begin; i < end; ++i)
    if (t.action[i] != Action::Alloc) return false;
  return true;
}

}  // namespace memsight::alloc
