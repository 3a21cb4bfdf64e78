// Replays the caching allocator block by block (see replay.h): every block
// goes where the trace says, sized by torch's rules.
#include "allocator/replay.h"

#include <algorithm>
#include <utility>

#include "allocator/trace_start.h"

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
    }
    b = next;
  }
}

}  // namespace

Result run(const Snapshot& snap, size_t device, const alloc::Settings& cfg,
           std::span<const int64_t> moments) {
  Result res;
  const TraceTable& t = snap.trace;
  alloc::TraceStart ts = alloc::trace_start(snap, device, cfg, 0);
  alloc::CachingAllocator a(cfg, /*index_free=*/false, /*index_starts=*/true);
  res.blocks.reserve(ts.live.size() + ts.allocs);
  Column<uint32_t> block_of(ts.requests, kNone);  // request -> its block while live
  alloc::load_start(a, snap, ts, [&](uint32_t b, const alloc::TraceStart::Live& l) {
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
  res.estimated_blocks = ts.estimated;
  res.start = a.now;

  // Moments asked for, by event; each is kept after its event is replayed.
  std::vector<std::pair<int64_t, size_t>> wanted;
  for (size_t i = 0; i < moments.size(); ++i)
    if (moments[i] >= -1 && moments[i] < static_cast<int64_t>(ts.end - ts.begin))
      wanted.emplace_back(moments[i], i);
  std::sort(wanted.begin(), wanted.end());
  std::vector<std::pair<size_t, OomState>> kept;
  size_t next_wanted = 0;
  auto keep_moments = [&](int64_t ev) {
    for (; next_wanted < wanted.size() && wanted[next_wanted].first == ev; ++next_wanted)
      kept.emplace_back(wanted[next_wanted].second, OomState{ev, a.now, a.free_space()});
  };
  keep_moments(-1);

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
  const uint32_t* request = ts.request.data();
  for (uint32_t r = ts.begin; r < ts.end; ++r) {
    auto ev = static_cast<int32_t>(r - ts.begin);
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
          b = a.add_detached(addr, rounded, sz, ts.rank(t.stream[r]));
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
        uint32_t q = request[ev], b = q == ts.kNoRequest ? kNone : block_of[q];
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
        a.add_segment(addr, sz, ts.pool_of(a, addr, sz, false), ts.rank(t.stream[r]));
        break;
      }
      case Action::SegmentFree:
        free_segment(a, addr, size_of[r]);
        break;
      case Action::SegmentMap: {
        int64_t sz = size_of[r];
        uint16_t pool = ts.pool_of(a, addr, sz, true), stream = ts.rank(t.stream[r]);
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
    keep_moments(ev);
  }
  res.end = a.now;
  std::sort(kept.begin(), kept.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [i, st] : kept) res.moments.push_back(std::move(st));
  res.peak = a.peak;
  res.peak.requested = a.peak_requested;
  res.peak_allocated_event = a.peak_allocated_event;
  res.peak_active_event = a.peak_active_event;
  res.peak_reserved_event = a.peak_reserved_event;
  for (const auto& [addr, fb] : ts.final_live) {
    uint32_t b = a.starting_at(addr);
    if (b == kNone || !(a.blocks[b].allocated || a.blocks[b].pending) ||
        a.blocks[b].size != fb.size)
      ++res.size_mismatches;
  }
  return res;
}

}  // namespace memsight::replay
