// torch's DeviceCachingAllocator::malloc and free, simulated (see
// simulate.h): the same paths in the same order, over the shared
// CachingAllocator and rules.
#include "allocator/simulate.h"

#include <algorithm>
#include <map>

#include "allocator/sim_addresses.h"

namespace memsight::simulate {
namespace {

using alloc::Block;
using alloc::FreeSet;
using alloc::kNone;

class Simulator {
 public:
  Simulator(const Snapshot& snap, const Plan& p, const Inputs& in, Trail* trail)
      : t_(snap.trace),
        p_(p),
        in_(in),
        s_(in.settings),
        a_(in.settings, true, false),
        trail_(trail) {
    load_start();
    if (trail_) trail_->addresses.assign(p.trace.requests, -1);
    for (const auto& id : p.pool_ids)
      private_.push_back(a_.pool_of(false, id.first, id.second));  // large; small is + 1
    res_.unused_at_peak = unused();
    res_.outside_at_peak = a_.detached_allocated;
    res_.largest_free_at_peak = largest_free();
  }

  Result run() {
    for (uint32_t i = 0; i < p_.rows.size(); ++i) {
      owner_ = static_cast<int32_t>(i);
      const uint32_t request = p_.trace.request[i];
      switch (p_.rows[i]) {
        case Plan::kAlloc:
        case Plan::kOom:
          if (!serve(i)) {
            a_.observe(owner_);
            return finish();
          }
          break;
        case Plan::kFree:
          if (uint32_t b = block(request); b != kNone) {
            block_of_[request] = kNone;
            a_.free_block(b);
          }
          break;
        case Plan::kFreeRequested:
          if (uint32_t b = block(request); b != kNone && a_.blocks[b].allocated) {
            a_.free_requested(b);
            pending_.push_back(b);
          }
          break;
        case Plan::kFreeCompleted:
          complete(request);
          break;
        case Plan::kFreeAfter:
          after_.push_back(request);
          break;
        case Plan::kEmptyCache:
          release_cached_blocks();
          break;
        default:
          break;
      }
      observe();
    }
    return finish();
  }

 private:
  // The allocator as the trace began; new memory goes around the
  // cudaMalloc'd segments and address spaces then.
  void load_start() {
    const alloc::DeviceTrace& dt = p_.trace;
    block_of_.assign(dt.requests, kNone);
    alloc::load_start(a_, t_, dt.start, dt.index, dt.segment_rows,
                      [&](uint32_t b, const alloc::LiveBlock& l) {
                        a_.blocks[b].tag = l.request;
                        block_of_[l.request] = b;
                        if (l.pending) pending_.push_back(b);
                      });
    std::map<int64_t, int64_t> segments;
    for (const alloc::SegmentRange& r : dt.start.segments)
      if (!r.expandable) segments.emplace(r.start, r.end());
    addresses_ = SimAddresses(std::move(segments), a_.spaces, p_.recorded);
  }

  // The private pool entry i allocates from (its large pool), or -1.
  int private_pool(uint32_t i) {
    const auto& rows = p_.private_rows;
    while (next_private_ < rows.size() && rows[next_private_].first < i) ++next_private_;
    if (next_private_ < rows.size() && rows[next_private_].first == i)
      return private_[rows[next_private_].second];
    return -1;
  }

  // A request (entry i: an alloc, or an OOM in the recording). False: a
  // new OOM, where the job would have died.
  bool serve(uint32_t i) {
    const uint32_t r = p_.trace.begin + i;
    bool recorded_oom = p_.rows[i] == Plan::kOom;
    uint32_t b =
        malloc(t_.size[r], p_.trace.index.rank(t_.stream[r]), private_pool(i), recorded_oom);
    if (b == kNone) {
      if (!recorded_oom) {
        res_.stopped_at = owner_;
        return false;
      }
    } else if (recorded_oom) {
      res_.avoided.push_back(owner_);
    } else {
      res_.misplaced += a_.blocks[b].addr != t_.addr[r];
      a_.blocks[b].tag = p_.trace.request[i];
      block_of_[p_.trace.request[i]] = b;
      if (trail_) trail_->addresses[p_.trace.request[i]] = a_.blocks[b].addr;
    }
    complete_after();
    return true;
  }

  uint32_t block(uint32_t request) const {
    return request == alloc::DeviceTrace::kNoRequest ? kNone : block_of_[request];
  }

  // Fragmentation at the peak: while reserved memory stands at its peak,
  // the least of it that is not allocated (a new segment is empty at first;
  // what stays unused as it fills is what the settings cost).
  void observe() {
    int64_t before = a_.peak.reserved;
    a_.observe(owner_);
    const int64_t now_unused = unused();
    if (a_.peak.reserved > before ||
        (a_.now.reserved == a_.peak.reserved && now_unused < res_.unused_at_peak)) {
      res_.peak_reserved_event = a_.peak_reserved_event;
      res_.unused_at_peak = now_unused;
      res_.outside_at_peak = a_.detached_allocated;
      res_.largest_free_at_peak = largest_free();
    }
  }

  // Reserved bytes not allocated: of the segments the simulation holds, so
  // blocks in no segment (their memory never counted as reserved) do not
  // make it negative.
  int64_t unused() const { return a_.now.reserved - (a_.now.allocated - a_.detached_allocated); }

  Result finish() {
    res_.segments_placed_unanchored = addresses_.placed_unanchored();
    res_.peak = a_.peak;
    res_.peak.requested = a_.peak_requested;
    res_.peak_allocated_event = a_.peak_allocated_event;
    res_.peak_reserved_event = a_.peak_reserved_event;
    if (trail_) trail_->end.emplace(std::move(a_));
    return std::move(res_);
  }

  int64_t largest_free() const {
    int64_t best = 0;
    for (const alloc::Pool& pool : a_.pools) best = std::max(best, pool.free.largest());
    return best;
  }

  // A free whose block waited for other streams completes (or one whose
  // release already completed it: nothing left to do).
  void complete(uint32_t request) {
    uint32_t b = block(request);
    if (b == kNone) return;
    block_of_[request] = kNone;
    auto it = std::find(pending_.begin(), pending_.end(), b);
    if (it != pending_.end()) pending_.erase(it);
    a_.free_block(b);
  }

  void complete_after() {
    for (uint32_t request : after_) complete(request);
    after_.clear();
  }

  // synchronize_and_free_events: every block waiting for events is freed.
  void synchronize() {
    std::vector<uint32_t> done;
    done.swap(pending_);
    for (uint32_t b : done) {
      if (!a_.blocks[b].pending) continue;
      if (a_.blocks[b].tag != alloc::DeviceTrace::kNoRequest) block_of_[a_.blocks[b].tag] = kNone;
      a_.free_block(b);
    }
  }

  void log(Action action, int64_t addr, int64_t size) {
    if (in_.keep_events) res_.events.push_back({action, addr, size, owner_});
  }

  uint16_t pool_for(int64_t size, int private_large) const {
    bool small = alloc::small_request(size);
    if (private_large >= 0) return static_cast<uint16_t>(private_large + small);
    return small ? 1 : 0;
  }

  bool capped() const { return in_.device.limit >= 0; }

  // DeviceCachingAllocator::malloc. kNone: out of memory. The blocks the
  // steps find stay cached until carve() hands them out.
  uint32_t malloc(int64_t orig, uint16_t stream, int private_large, bool recorded_oom) {
    int64_t size = alloc::round_size(s_, orig);
    uint16_t pool = pool_for(size, private_large);
    int64_t alloc_size = alloc::allocation_size(size);
    uint32_t b = get_free_block(pool, stream, size);
    if (b == kNone) {
      if (capped() && s_.gc_threshold > 0) garbage_collect();
      b = alloc_block(pool, stream, size, alloc_size);
      if (b == kNone && release_available_cached_blocks(pool, stream, size))
        b = alloc_block(pool, stream, size, alloc_size);
      if (b == kNone && private_large < 0) {
        release_cached_blocks();
        b = alloc_block(pool, stream, size, alloc_size);
      }
    }
    if (b == kNone) {
      out_of_memory(size, alloc_size, recorded_oom);
      return kNone;
    }
    bool split = alloc::should_split(s_, a_.pools[pool].small, a_.blocks[b].size, size);
    return a_.carve(b, size, orig, split);
  }

  void out_of_memory(int64_t size, int64_t alloc_size, bool recorded) {
    Oom o;
    o.event = owner_;
    o.requested = size;
    o.reserved = a_.now.reserved;
    o.allocated = a_.now.allocated;
    o.free = a_.free_space();
    o.recorded = recorded;
    o.cap = capped() && a_.now.reserved + alloc_size > in_.device.limit;
    res_.ooms.push_back(o);
  }

  int64_t expandable_size(uint32_t b) const {
    const Block& x = a_.blocks[b];
    return x.size + (x.next != kNone && !a_.blocks[x.next].mapped ? a_.blocks[x.next].size : 0);
  }

  uint32_t get_free_block(uint16_t pool_id, uint16_t stream, int64_t size) {
    alloc::Pool& pool = a_.pools[pool_id];
    if (capped() && s_.gc_threshold > 0) ++pool.free_searches;
    const FreeSet& f = pool.free;
    auto stream_of = [](const FreeSet::Entry& e) { return static_cast<uint16_t>(e.hi >> 48); };
    FreeSet::Pos it = f.lower_bound(FreeSet::hi_of(stream, size), 0);
    if (f.at_end(it) || stream_of(f.at(it)) != stream) return kNone;
    if (a_.blocks[f.at(it).id].va) {
      if (s_.expandable_segments) {
        // Best fit by the size a block can grow to, up to the next pages.
        for (FreeSet::Pos next = f.next(it);
             a_.blocks[f.at(it).id].va && !f.at_end(next) && stream_of(f.at(next)) == stream &&
             expandable_size(f.at(next).id) < expandable_size(f.at(it).id);
             next = f.next(next))
          it = next;
      } else {
        do it = f.next(it);
        while (!f.at_end(it) && a_.blocks[f.at(it).id].va && stream_of(f.at(it)) == stream);
        if (f.at_end(it) || stream_of(f.at(it)) != stream) return kNone;
      }
    }
    uint32_t b = f.at(it).id;
    return alloc::may_serve(s_, size, a_.blocks[b].size) ? b : kNone;
  }

  // garbage_collect_cached_blocks: frees the default large pool's unsplit
  // blocks least recently reused, until reserved memory falls to the
  // threshold's share of the limit.
  void garbage_collect() {
    auto threshold = static_cast<int64_t>(s_.gc_threshold * static_cast<double>(in_.device.limit));
    if (a_.now.reserved <= threshold) return;
    int64_t target = a_.now.reserved - threshold, reclaimed = 0;
    alloc::Pool& pool = a_.pools[0];
    auto age = [&](uint32_t b) { return pool.free_searches - a_.blocks[b].gc_base; };
    int64_t total_age = 0, count = 0;
    pool.free.for_each([&](const FreeSet::Entry& e) {
      const Block& x = a_.blocks[e.id];
      if (!x.split() && !x.va) total_age += age(e.id), ++count;
    });
    bool freed = true;
    while (reclaimed < target && freed && count > 0) {
      double threshold_age = static_cast<double>(total_age) / static_cast<double>(count);
      freed = false;
      std::vector<uint32_t> order;
      pool.free.for_each([&](const FreeSet::Entry& e) { order.push_back(e.id); });
      for (uint32_t b : order) {
        const Block& x = a_.blocks[b];
        if (x.split() || x.va || static_cast<double>(age(b)) < threshold_age) continue;
        freed = true;
        reclaimed += x.size;
        total_age -= age(b);
        --count;
        release_block(b);
      }
    }
  }

  void release_block(uint32_t b) {
    const Block& x = a_.blocks[b];
    log(Action::SegmentFree, x.addr, x.size);
    addresses_.released(x.addr, x.size);
    a_.release_segment(b);
  }

  bool fits_device(int64_t bytes) const {
    return in_.device.capacity < 0 || a_.now.reserved + bytes <= in_.device.capacity;
  }

  uint32_t alloc_block(uint16_t pool, uint16_t stream, int64_t size, int64_t alloc_size) {
    if (capped() && a_.now.reserved + alloc_size > in_.device.limit) return kNone;
    if (s_.expandable_segments) return allocate_expandable(pool, stream, size);
    if (!fits_device(alloc_size)) return kNone;
    int64_t addr = addresses_.new_segment(alloc_size);
    uint32_t b = a_.add_segment(addr, alloc_size, pool, stream);
    ++res_.segments_created;
    log(Action::SegmentAlloc, addr, alloc_size);
    return b;
  }

  // find_expandable_block: the lowest address where `size` fits in free and
  // unmapped space of the pool's stream (from the unmapped block, or its
  // free predecessor); a new address space if none.
  uint32_t find_expandable(uint16_t pool, uint16_t stream, int64_t size) {
    uint32_t u = a_.first_unmapped_with_room(pool, stream, size);
    if (u != kNone) {
      uint32_t prev = a_.blocks[u].prev;
      return prev != kNone && a_.blocks[prev].mergeable() ? prev : u;
    }
    int64_t space = p_.trace.start.space_size;
    uint16_t sp = a_.add_space(addresses_.new_space(space), space, pool, stream);
    return a_.spaces[sp].head;
  }

  // map_block: pages for the first `size` bytes of unmapped block u.
  uint32_t map_pages(uint32_t u, int64_t size) {
    int64_t page = alloc::page_size(a_.pools[a_.blocks[u].pool].small);
    int64_t bytes = (size + page - 1) / page * page;
    if (!fits_device(bytes)) return kNone;
    int64_t addr = a_.blocks[u].addr;
    ++res_.segments_created;
    log(Action::SegmentMap, addr, bytes);
    return a_.map(u, addr, bytes);
  }

  uint32_t allocate_expandable(uint16_t pool, uint16_t stream, int64_t size) {
    uint32_t c = find_expandable(pool, stream, size);
    if (!a_.blocks[c].mapped) {
      c = map_pages(c, std::min(a_.blocks[c].size, size));
      if (c == kNone) return kNone;
    }
    while (a_.blocks[c].size < size) {
      uint32_t next = a_.blocks[c].next;
      c = map_pages(next, std::min(size - a_.blocks[c].size, a_.blocks[next].size));
      if (c == kNone) return kNone;
    }
    return c;
  }

  // release_available_cached_blocks: with max_split_size set, frees oversize
  // cached blocks of the stream, the smallest that covers the request or
  // else the largest ones, until enough is freed.
  bool release_available_cached_blocks(uint16_t pool_id, uint16_t stream, int64_t size) {
    if (s_.max_split_size == alloc::kNoLimit) return false;
    const FreeSet& f = a_.pools[pool_id].free;
    int64_t key = std::max(size, s_.max_split_size);
    auto stream_of = [](const FreeSet::Entry& e) { return static_cast<uint16_t>(e.hi >> 48); };
    auto size_of = [&](const FreeSet::Entry& e) { return a_.blocks[e.id].size; };
    FreeSet::Pos it = f.lower_bound(FreeSet::hi_of(stream, key), 0);
    std::vector<uint32_t> victims;
    if (f.at_end(it) || stream_of(f.at(it)) != stream) {
      if (f.is_first(it) || f.size() == 0) return false;
      int64_t released = 0;
      it = f.prev(it);
      while (released < key && size_of(f.at(it)) >= s_.max_split_size &&
             stream_of(f.at(it)) == stream) {
        released += size_of(f.at(it));
        victims.push_back(f.at(it).id);
        if (f.is_first(it)) break;
        it = f.prev(it);
      }
      if (released < key) {
        release_victims(victims);
        return false;
      }
    } else {
      victims.push_back(f.at(it).id);
    }
    release_victims(victims);
    return true;
  }

  void release_victims(const std::vector<uint32_t>& victims) {
    for (uint32_t b : victims)
      if (!a_.blocks[b].va && !a_.blocks[b].split()) release_block(b);
  }

  // release_cached_blocks (torch.cuda.empty_cache, and a request's last
  // retry): waits for every stream's events, then frees every unsplit
  // cached segment and unmaps the free pages of expandable ones. Only the
  // free blocks changed since the last call can be either: a walk over every
  // cached block each time made n empty_cache calls among n fragments of
  // pages cost n^2.
  void release_cached_blocks() {
    synchronize();
    for (uint16_t pool : {uint16_t{0}, uint16_t{1}}) {
      std::vector<uint32_t> to_unmap;
      for (uint32_t b : a_.take_touched(pool)) {
        const Block& x = a_.blocks[b];
        if (x.va)
          to_unmap.push_back(b);
        else if (!x.split())
          release_block(b);
      }
      for (uint32_t b : to_unmap) unmap_pages(b);
    }
  }

  // unmap_block: the whole pages inside free block b.
  void unmap_pages(uint32_t b) {
    const Block& x = a_.blocks[b];
    const alloc::AddressSpace& sp = a_.spaces[x.va - 1];
    int64_t page = alloc::page_size(a_.pools[x.pool].small);
    int64_t first = (x.addr - sp.base + page - 1) / page, last = (x.addr + x.size - sp.base) / page;
    if (first >= last) return;
    int64_t addr = sp.base + first * page, bytes = (last - first) * page;
    log(Action::SegmentUnmap, addr, bytes);
    a_.unmap(b, addr, bytes);
  }

  const TraceTable& t_;
  const Plan& p_;
  const Inputs& in_;
  const alloc::Settings& s_;
  alloc::CachingAllocator a_;
  std::vector<uint32_t> block_of_;  // request -> its block while live
  std::vector<uint32_t> pending_;   // blocks waiting for other streams' events
  std::vector<uint32_t> after_;     // requests the next request's release completes
  SimAddresses addresses_;
  std::vector<int> private_;  // plan's pool index -> its large pool (small: + 1)
  size_t next_private_ = 0;   // into the plan's private_rows
  int32_t owner_ = 0;
  Result res_;
  Trail* trail_ = nullptr;
};

}  // namespace

Result run(const Snapshot& snap, const Plan& p, const Inputs& in) {
  return Simulator(snap, p, in, nullptr).run();
}

Result run(const Snapshot& snap, const Plan& p, const Inputs& in, Trail* trail) {
  return Simulator(snap, p, in, trail).run();
}

}  // namespace memsight::simulate
