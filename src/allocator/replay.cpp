// Replays the caching allocator block by block (see replay.h): every block
// goes where the trace says, sized by torch's rules.
#include "allocator/replay.h"

#include <algorithm>
#include <utility>

#include "allocator/device_trace.h"

namespace memsight::replay {
namespace {

using alloc::Block;
using alloc::kNone;

// The free block a recorded allocation was carved from (b: the block
// starting at its address), or kNone when the replay's state disagrees with
// the record there.
uint32_t free_block_for(const alloc::CachingAllocator& a, uint32_t b, int64_t rounded) {
  if (b == kNone) return kNone;
  const Block& x = a.blocks[b];
  return x.mergeable() && x.mapped && x.size >= rounded ? b : kNone;
}

// A segment the record frees: normally one free block. When the replay
// disagrees (blocks still live in it), they leave the segment and live on
// outside it until freed.
void free_segment(alloc::CachingAllocator& a, int64_t addr, int64_t size) {
  uint32_t b = a.starting_at(addr);
  if (b != kNone) {
    const Block& x = a.blocks[b];
    if (x.mergeable() && !x.split() && !x.va && x.size == size) return a.release_segment(b);
  }
  a.now.reserved -= size;
  while (b != kNone && a.blocks[b].addr < addr + size) {
    Block& x = a.blocks[b];
    uint32_t next = x.next;
    if (x.prev != kNone) a.blocks[x.prev].next = kNone;
    if (next != kNone) a.blocks[next].prev = kNone;
    x.prev = x.next = kNone;
    if (x.mergeable()) {
      a.take_free(b);
      a.drop(b);
    } else {
      x.detached = true;
      if (x.allocated) a.detached_allocated += x.size;
    }
    b = next;
  }
}

// The blocks live at the start, loaded into `a` and listed first in
// res.blocks; block_of: request -> its block.
void load_trace_start(alloc::CachingAllocator& a, const Snapshot& snap,
                      const alloc::DeviceTrace& dt, Result& res, Column<uint32_t>& block_of) {
  res.blocks.reserve(dt.start.live.size() + dt.allocs);
  alloc::load_start(a, snap.trace, dt.start, dt.index, dt.segment_rows,
                    [&](uint32_t b, const alloc::LiveBlock& l) {
                      block_of[l.request] = b;
                      Lifetime lt;
                      lt.address = l.addr;
                      lt.size = l.size;
                      lt.requested = l.requested;
                      lt.stack = l.stack;
                      if (l.pending) lt.free_requested = Lifetime::kBefore;
                      a.blocks[b].tag = static_cast<uint32_t>(res.blocks.size());
                      res.blocks.push_back(lt);
                    });
  res.estimated_blocks = dt.start.estimated;
  res.start = a.now;
}

// The moments run() was asked for (events, -1: before the first), kept
// after their event is replayed; events outside the trace are left out.
class Moments {
 public:
  Moments(std::span<const int64_t> moments, int64_t events) {
    for (size_t i = 0; i < moments.size(); ++i)
      if (moments[i] >= -1 && moments[i] < events) wanted_.emplace_back(moments[i], i);
    std::sort(wanted_.begin(), wanted_.end());
  }
  void keep(int64_t ev, const alloc::CachingAllocator& a) {
    for (; next_ < wanted_.size() && wanted_[next_].first == ev; ++next_)
      kept_.emplace_back(wanted_[next_].second, OomState{ev, a.now, a.free_space()});
  }
  // The states kept, in the order asked.
  std::vector<OomState> take() {
    std::sort(kept_.begin(), kept_.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<OomState> out;
    out.reserve(kept_.size());
    for (const auto& [i, st] : kept_) out.push_back(st);
    return out;
  }

 private:
  std::vector<std::pair<int64_t, size_t>> wanted_;  // (event, index asked)
  std::vector<std::pair<size_t, OomState>> kept_;
  size_t next_ = 0;
};

// Live blocks at the snapshot that the replay ends without, or with
// another size.
int64_t size_mismatches(alloc::CachingAllocator& a, const alloc::DeviceTrace& dt) {
  int64_t n = 0;
  for (const auto& [addr, fb] : dt.final_live) {
    uint32_t b = a.starting_at(addr);
    if (b == kNone || !(a.blocks[b].allocated || a.blocks[b].pending) ||
        a.blocks[b].size != fb.size)
      ++n;
  }
  return n;
}

}  // namespace

Result run(const Snapshot& snap, size_t device, const alloc::Settings& cfg,
           std::span<const int64_t> moments) {
  Result res;
  const TraceTable& t = snap.trace;
  alloc::DeviceTrace dt = alloc::read_device_trace(snap, device, cfg, 0);
  alloc::CachingAllocator a(cfg, /*index_free=*/false, /*index_starts=*/true);
  Column<uint32_t> block_of(dt.requests, kNone);  // request -> its block while live
  load_trace_start(a, snap, dt, res, block_of);
  Moments kept(moments, static_cast<int64_t>(dt.end - dt.begin));
  kept.keep(-1, a);

  // Ends a block's life in the record (its allocated bytes stop at
  // `ev`; free_completed: its active bytes too). A block still allocated
  // has had no free_requested: the allocator's state says so without a read
  // of the lifetime (a cache miss on a big trace).
  auto end_life = [&](uint32_t b, int32_t ev, bool completed) {
    Lifetime& l = res.blocks[a.blocks[b].tag];
    if (a.blocks[b].allocated) l.free_requested = ev;
    if (completed) {
      l.freed = true;
      a.free_block(b);
    } else {
      a.free_requested(b);
    }
  };
  // The columns, held here: the compiler cannot tell that the allocator's
  // writes leave them where they are.
  const Action* action = t.action.data();
  const int64_t *addr_of = t.addr.data(), *size_of = t.size.data();
  const uint32_t* request = dt.request.data();
  for (uint32_t r = dt.begin; r < dt.end; ++r) {
    auto ev = static_cast<int32_t>(r - dt.begin);
    int64_t addr = addr_of[r];
    switch (action[r]) {
      case Action::Alloc: {
        int64_t sz = size_of[r];
        uint32_t b = a.starting_at(addr);
        if (b != kNone && (a.blocks[b].allocated || a.blocks[b].pending)) {
          end_life(b, ev, true);  // a block we thought live is taken again: the state was off
          b = a.starting_at(addr);
        }
        int64_t rounded = alloc::round_size(cfg, sz);
        b = free_block_for(a, b, rounded);
        if (b != kNone) {
          const Block& x = a.blocks[b];
          bool split = alloc::should_split(cfg, a.pools[x.pool].small, x.size, rounded);
          b = a.carve(b, rounded, sz, split);
        } else {
          ++res.unplaced_allocs;
          b = a.add_detached(addr, rounded, sz, dt.index.rank(t.stream[r]));
        }
        Lifetime l;
        l.address = addr;
        l.size = a.blocks[b].size;
        l.requested = sz;
        l.stack = t.stack[r];
        l.alloc_event = ev;
        a.blocks[b].tag = static_cast<uint32_t>(res.blocks.size());
        res.blocks.push_back(l);
        block_of[request[ev]] = b;
        break;
      }
      case Action::FreeRequested:
      case Action::FreeCompleted: {
        uint32_t q = request[ev], b = q == dt.kNoRequest ? kNone : block_of[q];
        if (b == kNone) break;
        const Block& x = a.blocks[b];
        if (!x.used || x.addr != addr || !(x.allocated || x.pending)) break;
        bool completed = action[r] == Action::FreeCompleted;
        if (completed) block_of[q] = kNone;
        end_life(b, ev, completed);
        break;
      }
      case Action::SegmentAlloc: {
        int64_t sz = size_of[r];
        a.add_segment(addr, sz, dt.index.pool_of(a, addr, sz, false), dt.index.rank(t.stream[r]));
        break;
      }
      case Action::SegmentFree:
        free_segment(a, addr, size_of[r]);
        break;
      case Action::SegmentMap: {
        int64_t sz = size_of[r];
        uint16_t pool = dt.index.pool_of(a, addr, sz, true), stream = dt.index.rank(t.stream[r]);
        uint32_t u = a.unmapped_at(pool, stream, addr);
        if (u != kNone && addr + sz <= a.blocks[u].addr + a.blocks[u].size)
          a.map(u, addr, sz);
        else
          a.add_segment(addr, sz, pool, stream);
        break;
      }
      case Action::SegmentUnmap: {
        int64_t sz = size_of[r];
        uint32_t b = a.space_block_at(addr);
        if (b != kNone && a.blocks[b].mergeable() && a.blocks[b].mapped &&
            addr + sz <= a.blocks[b].addr + a.blocks[b].size)
          a.unmap(b, addr, sz);
        else
          free_segment(a, addr, sz);
        break;
      }
      case Action::Oom:
        res.ooms.push_back({ev, a.now, a.free_space()});
        break;
      default:
        break;
    }
    a.observe(ev);
    kept.keep(ev, a);
  }
  res.end = a.now;
  res.moments = kept.take();
  res.peak = a.peak;
  res.peak.requested = a.peak_requested;
  res.peak_allocated_event = a.peak_allocated_event;
  res.peak_active_event = a.peak_active_event;
  res.peak_reserved_event = a.peak_reserved_event;
  res.size_mismatches = size_mismatches(a, dt);
  return res;
}

}  // namespace memsight::replay
