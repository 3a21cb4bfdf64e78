// Replays the caching allocator block by block (see replay.h).
#include "analysis/replay.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <map>
#include <unordered_map>

#include "analysis/address_map.h"

namespace memsight::replay {
namespace {

constexpr int64_t kMinBlock = 512;
constexpr int64_t kSmallSize = 1 << 20;  // requests up to 1 MiB use the small pool
constexpr int64_t kSmallSegment = 2 << 20;

struct Range {
  int64_t start = 0, size = 0;
  bool small = false, expandable = false;
  std::vector<std::pair<int64_t, int64_t>> blocks;  // live blocks (address, size), sorted
  int64_t end() const { return start + size; }
};

// The device's segments (for expandable segments: mapped ranges, merged when
// they touch), ordered by address.
class Segments {
 public:
  int64_t total = 0;
  std::map<int64_t, Range> ranges;

 private:
  Range* last_ = nullptr;

 public:
  Range* find(int64_t addr) {
    // Consecutive events mostly touch the same segment: try the last one first.
    if (last_ && addr >= last_->start && addr < last_->end()) return last_;
    auto it = ranges.upper_bound(addr);
    if (it == ranges.begin()) return nullptr;
    --it;
    if (addr >= it->second.end()) return nullptr;
    return last_ = &it->second;
  }
  void add(int64_t start, int64_t size, bool small, bool expandable) {
    if (size <= 0) return;
    last_ = nullptr;
    total += size;
    Range r{start, size, small, expandable, {}};
    if (expandable) {
      auto next = ranges.find(start + size);
      if (next != ranges.end() && next->second.expandable) {
        r.size += next->second.size;
        r.blocks = std::move(next->second.blocks);
        ranges.erase(next);
      }
      auto it = ranges.lower_bound(start);
      if (it != ranges.begin()) {
        auto prev = std::prev(it);
        if (prev->second.expandable && prev->second.end() == start) {
          prev->second.size += r.size;
          auto& b = prev->second.blocks;
          b.insert(b.end(), r.blocks.begin(), r.blocks.end());
          return;
        }
      }
    }
    ranges[start] = std::move(r);
  }
  // Takes [start, start+size) away, splitting a range that holds it.
  void remove(int64_t start, int64_t size) {
    last_ = nullptr;
    int64_t end = start + size;
    auto it = ranges.upper_bound(start);
    if (it != ranges.begin()) --it;
    while (it != ranges.end() && it->second.start < end) {
      Range r = std::move(it->second);
      it = ranges.erase(it);
      int64_t lo = std::max(r.start, start), hi = std::min(r.end(), end);
      if (lo >= hi) {
        ranges[r.start] = std::move(r);
        continue;
      }
      total -= hi - lo;
      if (r.start < lo) {
        Range left{r.start, lo - r.start, r.small, r.expandable, {}};
        for (auto& b : r.blocks)
          if (b.first < lo) left.blocks.push_back(b);
        ranges[left.start] = std::move(left);
      }
      if (hi < r.end()) {
        Range right{hi, r.end() - hi, r.small, r.expandable, {}};
        for (auto& b : r.blocks)
          if (b.first >= hi) right.blocks.push_back(b);
        it = ranges.emplace(right.start, std::move(right)).first;
        ++it;
      }
    }
  }
};

bool is_alloc_event(Action a) {
  return a == Action::Alloc || a == Action::FreeRequested || a == Action::FreeCompleted;
}

}  // namespace

Config Config::from(const Snapshot& snap) {
  Config c;
  const PyValue* st = snap.top("allocator_settings");
  if (!st) return c;
  if (const PyValue* v = st->get("max_split_size"); v && v->kind == PyValue::Kind::Int && v->i > 0)
    c.max_split_size = v->i;
  if (const PyValue* v = st->get("expandable_segments"); v && v->kind == PyValue::Kind::Bool)
    c.expandable_segments = v->b;
  if (const PyValue* v = st->get("roundup_power2_divisions"); v && v->kind == PyValue::Kind::Dict)
    for (size_t i = 0; i + 1 < v->items.size(); i += 2) {
      const PyValue &k = v->items[i], &val = v->items[i + 1];
      if (k.kind != PyValue::Kind::Str || val.kind != PyValue::Kind::Int) continue;
      int64_t mib = 0;
      for (char ch : k.s) mib = ch >= '0' && ch <= '9' ? mib * 10 + (ch - '0') : -1;
      if (mib <= 0 || !std::has_single_bit(static_cast<uint64_t>(mib))) continue;
      size_t idx = static_cast<size_t>(std::countr_zero(static_cast<uint64_t>(mib)));
      if (idx < std::size(c.divisions)) c.divisions[idx] = val.i;
    }
  return c;
}

int64_t Config::round_size(int64_t size) const {
  if (size < kMinBlock) return kMinBlock;
  auto u = static_cast<uint64_t>(size);
  // Intervals start at 1 MiB (index 0) and end at 64 GiB.
  int log = std::bit_width(u) - 1;
  size_t idx = static_cast<size_t>(std::clamp(log - 20, 0, 16));
  int64_t div = divisions[idx];
  if (div > 1 && size > kMinBlock * div) {
    if (std::has_single_bit(u)) return size;
    uint64_t floor = std::bit_floor(u);
    uint64_t step = floor >> (std::bit_width(static_cast<uint64_t>(div)) - 1);
    if (step == 0) return static_cast<int64_t>(floor << 1);
    uint64_t down = u & ~(step - 1);
    return static_cast<int64_t>(down == u ? u : down + step);
  }
  return (size + kMinBlock - 1) / kMinBlock * kMinBlock;
}

Result run(const Snapshot& snap, size_t device, const Config& cfg,
           std::span<const int64_t> moments) {
  Result res;
  const TraceTable& t = snap.trace;
  uint32_t begin = 0, end = 0;
  if (device < snap.device_count()) std::tie(begin, end) = snap.device_rows(device);
  auto dev = static_cast<int64_t>(device);

  // The segments at the start: those of the snapshot with the trace's
  // segment events undone, newest first.
  Segments segs;
  struct FinalBlock {
    int64_t size, requested;
    StackId stack;
    bool pending;
  };
  std::unordered_map<int64_t, FinalBlock> final_live;
  for (const Segment& s : snap.segments) {
    if (s.device != dev) continue;
    segs.add(s.address, s.total_size, snap.str(s.segment_type) == "small", s.is_expandable);
    for (const Block& b : snap.segment_blocks(s))
      if (b.state == BlockState::ActiveAllocated || b.state == BlockState::ActivePendingFree)
        final_live[b.address] = {b.size, b.requested_size, b.stack,
                                 b.state == BlockState::ActivePendingFree};
  }
  for (uint32_t r = end; r-- > begin;) {
    int64_t a = t.addr[r], sz = t.size[r];
    switch (t.action[r]) {
      case Action::SegmentAlloc:
        segs.remove(a, sz);
        break;
      case Action::SegmentFree:
        segs.add(a, sz, sz == kSmallSegment, false);
        break;
      case Action::SegmentMap:
        segs.remove(a, sz);
        break;
      case Action::SegmentUnmap:
        segs.add(a, sz, false, true);
        break;
      default:
        break;
    }
  }
  res.start.reserved = segs.total;

  // Blocks live at the start: the first event of their address is a free,
  // or no event touches a block live at the snapshot.
  struct First {
    Action action;
    uint32_t row;
  };
  AddressMap<First> first;
  size_t allocs = 0;
  for (uint32_t r = begin; r < end; ++r) {
    Action a = t.action[r];
    if (!is_alloc_event(a)) continue;
    allocs += a == Action::Alloc;
    if (!first.find(t.addr[r])) first[t.addr[r]] = {a, r};
  }
  std::vector<Lifetime> initial;
  first.for_each([&](int64_t addr, const First& f) {
    if (f.action == Action::Alloc) return;
    Lifetime l;
    l.address = addr;
    l.requested = t.size[f.row];
    l.size = cfg.round_size(l.requested);  // estimated: its allocation is not in the trace
    if (f.action == Action::FreeCompleted) l.free_requested = Lifetime::kBefore;  // pending
    ++res.estimated_blocks;
    initial.push_back(l);
  });
  for (const auto& [addr, fb] : final_live) {
    if (first.find(addr)) continue;
    Lifetime l;
    l.address = addr;
    l.size = fb.size;
    l.requested = fb.requested;
    l.stack = fb.stack;
    if (fb.pending) l.free_requested = Lifetime::kBefore;
    initial.push_back(l);
  }
  std::sort(initial.begin(), initial.end(),
            [](const Lifetime& x, const Lifetime& y) { return x.address < y.address; });
  res.blocks.reserve(initial.size() + allocs);
  AddressMap<uint32_t> live;  // address -> index into res.blocks
  for (const Lifetime& l : initial) {
    if (Range* rg = segs.find(l.address)) rg->blocks.emplace_back(l.address, l.size);
    live[l.address] = static_cast<uint32_t>(res.blocks.size());
    res.blocks.push_back(l);
    res.start.active += l.size;
    res.start.requested += l.requested;
    if (l.free_requested != Lifetime::kBefore) res.start.allocated += l.size;
  }
  for (auto& [start, rg] : segs.ranges) std::sort(rg.blocks.begin(), rg.blocks.end());

  Counters cur = res.start;
  res.peak = cur;
  auto remove_block = [&](int64_t addr) {
    Range* rg = segs.find(addr);
    if (!rg) return;
    auto it =
        std::lower_bound(rg->blocks.begin(), rg->blocks.end(), std::make_pair(addr, INT64_MIN));
    if (it != rg->blocks.end() && it->first == addr) rg->blocks.erase(it);
  };
  // The counters and the free space inside the segments now.
  auto state_at = [&](int64_t ev, const Counters& c) {
    OomState o;
    o.event = ev;
    o.at = c;
    o.at.reserved = segs.total;
    for (const auto& entry : segs.ranges) {
      const Range& rg = entry.second;
      int64_t pos = rg.start;
      auto gap = [&](int64_t until) {
        int64_t g = until - pos;
        if (g <= 0) return;
        o.free.bytes += g;
        ++o.free.blocks;
        (rg.small ? o.free.small_bytes : o.free.large_bytes) += g;
        int64_t& largest = rg.small ? o.free.largest_small : o.free.largest_large;
        largest = std::max(largest, g);
      };
      for (auto [addr, size] : rg.blocks) {
        gap(addr);
        pos = std::max(pos, addr + size);
      }
      gap(rg.end());
      if (rg.blocks.empty() && !rg.expandable) o.free.releasable += rg.size;
    }
    return o;
  };
  // Moments asked for, by event; each is kept after its event is replayed.
  std::vector<std::pair<int64_t, size_t>> wanted;
  for (size_t i = 0; i < moments.size(); ++i)
    if (moments[i] >= -1 && moments[i] < static_cast<int64_t>(end - begin))
      wanted.emplace_back(moments[i], i);
  std::sort(wanted.begin(), wanted.end());
  std::vector<std::pair<size_t, OomState>> kept;
  size_t next_wanted = 0;
  auto keep_moments = [&](int64_t ev) {
    for (; next_wanted < wanted.size() && wanted[next_wanted].first == ev; ++next_wanted)
      kept.emplace_back(wanted[next_wanted].second, state_at(ev, cur));
  };
  keep_moments(-1);
  for (uint32_t r = begin; r < end; ++r) {
    auto ev = static_cast<int32_t>(r - begin);
    int64_t a = t.addr[r], sz = t.size[r];
    switch (t.action[r]) {
      case Action::Alloc: {
        int64_t rounded = cfg.round_size(sz), size = rounded;
        Range* rg = segs.find(a);
        bool placed = false;
        if (rg) {
          auto& bl = rg->blocks;
          auto it = std::lower_bound(bl.begin(), bl.end(), std::make_pair(a, INT64_MIN));
          int64_t prev_end =
              it == bl.begin() ? rg->start : std::prev(it)->first + std::prev(it)->second;
          int64_t next = it == bl.end() ? rg->end() : it->first;
          int64_t free_block = next - a;
          if (prev_end <= a && free_block >= rounded) {
            int64_t remaining = free_block - rounded;
            bool small = rounded <= kSmallSize;
            bool split = small || cfg.expandable_segments
                             ? remaining >= kMinBlock
                             : rounded < cfg.max_split_size && remaining > kSmallSize;
            size = split ? rounded : free_block;
            placed = prev_end == a;
            bl.insert(it, {a, size});
          }
        }
        if (!placed) ++res.unplaced_allocs;
        if (uint32_t* old = live.find(a)) {
          // A block we thought live is taken again: the state was off.
          Lifetime& o = res.blocks[*old];
          if (o.free_requested == Lifetime::kNever) {
            o.free_requested = ev;
            cur.allocated -= o.size;
          }
          o.freed = true;
          cur.active -= o.size;
          cur.requested -= o.requested;
        }
        Lifetime l;
        l.address = a;
        l.size = size;
        l.requested = sz;
        l.stack = t.stack[r];
        l.alloc_event = ev;
        live[a] = static_cast<uint32_t>(res.blocks.size());
        res.blocks.push_back(l);
        cur.allocated += size;
        cur.active += size;
        cur.requested += sz;
        break;
      }
      case Action::FreeRequested:
      case Action::FreeCompleted: {
        uint32_t* idx = live.find(a);
        if (!idx) break;
        Lifetime& l = res.blocks[*idx];
        if (l.free_requested == Lifetime::kNever) {
          l.free_requested = ev;
          cur.allocated -= l.size;
        }
        if (t.action[r] == Action::FreeCompleted) {
          l.freed = true;
          cur.active -= l.size;
          cur.requested -= l.requested;
          remove_block(a);
          live.erase(a);
        }
        break;
      }
      case Action::SegmentAlloc:
        segs.add(a, sz, sz == kSmallSegment, false);
        break;
      case Action::SegmentMap:
        segs.add(a, sz, false, true);
        break;
      case Action::SegmentFree:
      case Action::SegmentUnmap:
        segs.remove(a, sz);
        break;
      case Action::Oom:
        res.ooms.push_back(state_at(ev, cur));
        break;
      default:
        break;
    }
    cur.reserved = segs.total;
    if (cur.allocated > res.peak.allocated) {
      res.peak.allocated = cur.allocated;
      res.peak_allocated_event = ev;
    }
    if (cur.active > res.peak.active) {
      res.peak.active = cur.active;
      res.peak_active_event = ev;
    }
    if (cur.reserved > res.peak.reserved) {
      res.peak.reserved = cur.reserved;
      res.peak_reserved_event = ev;
    }
    res.peak.requested = std::max(res.peak.requested, cur.requested);
    keep_moments(ev);
  }
  res.end = cur;
  std::sort(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [i, st] : kept) res.moments.push_back(std::move(st));
  for (const auto& [addr, fb] : final_live) {
    uint32_t* idx = live.find(addr);
    if (!idx || res.blocks[*idx].size != fb.size) ++res.size_mismatches;
  }
  return res;
}

}  // namespace memsight::replay
