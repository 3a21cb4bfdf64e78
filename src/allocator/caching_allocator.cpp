// The allocator's state and its moves (see caching_allocator.h).
#include "allocator/caching_allocator.h"

#include <algorithm>

namespace memsight::alloc {

CachingAllocator::CachingAllocator(const Settings& s, bool index_free, bool index_starts)
    : settings(s), index_free_(index_free), index_starts_(index_starts) {
  pools.resize(2);
  pools[1].small = true;
}

uint16_t CachingAllocator::pool_of(bool small, int64_t id0, int64_t id1) {
  if (id0 == 0 && id1 == 0) return small ? 1 : 0;
  for (size_t i = 2; i < pools.size(); i += 2)
    if (pools[i].id[0] == id0 && pools[i].id[1] == id1) return static_cast<uint16_t>(i + small);
  for (bool s : {false, true}) {
    Pool p;
    p.small = s;
    p.id[0] = id0;
    p.id[1] = id1;
    pools.push_back(std::move(p));
  }
  return static_cast<uint16_t>(pools.size() - 2 + small);
}

uint32_t CachingAllocator::new_block() {
  if (!free_slots_.empty()) {
    uint32_t b = free_slots_.back();
    free_slots_.pop_back();
    blocks[b] = Block{};
    blocks[b].used = true;
    return b;
  }
  blocks.emplace_back();
  blocks.back().used = true;
  return static_cast<uint32_t>(blocks.size() - 1);
}

void CachingAllocator::delete_block(uint32_t b) {
  blocks[b].used = false;
  free_slots_.push_back(b);
}

void CachingAllocator::put_free(uint32_t b) {
  Block& x = blocks[b];
  Pool& p = pools[x.pool];
  x.gc_base = p.free_searches;
  if (index_free_) {
    p.free.insert(FreeSet::hi_of(x.stream, x.size), static_cast<uint64_t>(x.addr), b);
    touch(p, b);
  }
  note_room(b);
}

void CachingAllocator::touch(Pool& p, uint32_t b) {
  if (p.touched_all) return;
  if (p.touched.size() > 2 * p.free.size() + 64) {
    p.touched_all = true;
    p.touched.clear();
    return;
  }
  p.touched.push_back(b);
}

std::vector<uint32_t> CachingAllocator::take_touched(uint16_t pool) {
  Pool& p = pools[pool];
  std::vector<uint32_t> out;
  if (p.touched_all) {
    p.free.for_each([&](const FreeSet::Entry& e) { out.push_back(e.id); });
  } else {
    // Those still free in this pool (an id may have gone, or been reused),
    // once each, in the index's order.
    for (uint32_t b : p.touched) {
      const Block& x = blocks[b];
      if (x.mergeable() && x.mapped && x.pool == pool) out.push_back(b);
    }
    auto key = [&](uint32_t b) {
      const Block& x = blocks[b];
      return std::pair(FreeSet::hi_of(x.stream, x.size), static_cast<uint64_t>(x.addr));
    };
    std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  p.touched.clear();
  p.touched_all = false;
  return out;
}

void CachingAllocator::take_free(uint32_t b) {
  const Block& x = blocks[b];
  if (index_free_)
    pools[x.pool].free.erase(FreeSet::hi_of(x.stream, x.size), static_cast<uint64_t>(x.addr));
}

void CachingAllocator::put_unmapped(uint32_t b) {
  const Block& x = blocks[b];
  if (unmapped_node_.size() < blocks.size()) unmapped_node_.resize(blocks.size(), kNone);
  unmapped_node_[b] = pools[x.pool].unmapped.insert(x.stream, x.addr, b);
  note_room(b);
}

void CachingAllocator::take_unmapped(uint32_t b) {
  if (b >= unmapped_node_.size() || unmapped_node_[b] == kNone) return;
  pools[blocks[b].pool].unmapped.erase(unmapped_node_[b]);
  unmapped_node_[b] = kNone;
}

uint32_t CachingAllocator::unmapped_at(uint16_t pool, uint16_t stream, int64_t addr) const {
  // In address order: the ranges past addr cannot hold it.
  uint32_t out = kNone;
  pools[pool].unmapped.find_in_stream(stream, [&](int64_t at, uint32_t id) {
    if (at > addr) return true;
    if (blocks[id].addr <= addr && addr < blocks[id].addr + blocks[id].size) out = id;
    return out != kNone;
  });
  return out;
}

uint32_t CachingAllocator::space_block_at(int64_t addr) const {
  for (const AddressSpace& sp : spaces) {
    if (addr < sp.base || addr >= sp.base + sp.size) continue;
    for (uint32_t b = sp.head; b != kNone; b = blocks[b].next)
      if (addr < blocks[b].addr + blocks[b].size) return addr >= blocks[b].addr ? b : kNone;
  }
  return kNone;
}

uint32_t CachingAllocator::new_block(int64_t addr, int64_t size, uint16_t pool, uint16_t stream) {
  uint32_t b = new_block();
  Block& x = blocks[b];
  x.addr = addr;
  x.size = size;
  x.pool = pool;
  x.stream = stream;
  return b;
}

uint32_t CachingAllocator::add_segment(int64_t addr, int64_t size, uint16_t pool, uint16_t stream) {
  uint32_t b = new_block(addr, size, pool, stream);
  set_start(b);
  put_free(b);
  now.reserved += size;
  return b;
}

void CachingAllocator::release_segment(uint32_t b) {
  take_free(b);
  now.reserved -= blocks[b].size;
  clear_start(blocks[b].addr, b);
  delete_block(b);
}

uint16_t CachingAllocator::add_space(int64_t base, int64_t size, uint16_t pool, uint16_t stream) {
  uint32_t b = new_block(base, size, pool, stream);
  Block& x = blocks[b];
  x.mapped = false;
  spaces.push_back({base, size, pool, stream, b});
  x.va = static_cast<uint16_t>(spaces.size());
  put_unmapped(b);
  return static_cast<uint16_t>(spaces.size() - 1);
}

uint32_t CachingAllocator::map(uint32_t u, int64_t addr, int64_t size) {
  take_unmapped(u);
  Block x = blocks[u];
  int64_t end = x.addr + x.size;
  uint32_t m = u;
  if (addr > x.addr) {  // [x.addr, addr) stays unmapped
    blocks[u].size = addr - x.addr;
    put_unmapped(u);
    m = new_block();
    blocks[m] = x;
    blocks[m].used = true;
    blocks[m].prev = u;
    blocks[u].next = m;
    if (x.next != kNone) blocks[x.next].prev = m;
  }
  blocks[m].addr = addr;
  blocks[m].size = size;
  blocks[m].mapped = true;
  if (addr + size < end) {  // [addr + size, end) stays unmapped
    uint32_t r = new_block();
    Block& rb = blocks[r];
    rb = blocks[m];
    rb.used = true;
    rb.addr = addr + size;
    rb.size = end - (addr + size);
    rb.mapped = false;
    rb.prev = m;
    rb.next = blocks[m].next;
    if (rb.next != kNone) blocks[rb.next].prev = r;
    blocks[m].next = r;
    put_unmapped(r);
  }
  now.reserved += size;
  merge(m, blocks[m].prev);
  merge(m, blocks[m].next);
  if (blocks[m].prev == kNone) spaces[x.va - 1].head = m;
  set_start(m);
  put_free(m);
  return m;
}

void CachingAllocator::unmap(uint32_t b, int64_t addr, int64_t size) {
  take_free(b);
  Block x = blocks[b];
  clear_start(x.addr, b);
  auto piece = [&](int64_t at, int64_t len, uint32_t prev, uint32_t next) {
    uint32_t n = new_block();
    Block& nb = blocks[n];
    nb = x;
    nb.used = true;
    nb.addr = at;
    nb.size = len;
    nb.prev = prev;
    nb.next = next;
    return n;
  };
  if (addr > x.addr) {  // before_free
    uint32_t n = piece(x.addr, addr - x.addr, x.prev, b);
    if (x.prev != kNone)
      blocks[x.prev].next = n;
    else
      spaces[x.va - 1].head = n;
    blocks[b].prev = n;
    set_start(n);
    put_free(n);
  }
  if (addr + size < x.addr + x.size) {  // after_free
    uint32_t n = piece(addr + size, x.addr + x.size - addr - size, b, x.next);
    if (x.next != kNone) blocks[x.next].prev = n;
    blocks[b].next = n;
    set_start(n);
    put_free(n);
  }
  Block& m = blocks[b];
  m.addr = addr;
  m.size = size;
  m.mapped = false;
  now.reserved -= size;
  merge(b, blocks[b].prev);
  merge(b, blocks[b].next);
  if (blocks[b].prev == kNone) spaces[x.va - 1].head = b;
  put_unmapped(b);
}

bool CachingAllocator::mergeable_into(uint32_t dst, uint32_t src) const {
  return src != kNone && blocks[src].mergeable() && blocks[src].mapped == blocks[dst].mapped;
}

void CachingAllocator::rekey(FreeKey old, uint32_t b) {
  Block& x = blocks[b];
  Pool& p = pools[x.pool];
  x.gc_base = p.free_searches;
  if (index_free_) {
    FreeKey now = free_key(x);
    p.free.rekey(old.hi, old.lo, now.hi, now.lo, b);
    touch(p, b);
  }
  note_room(b);
}

bool CachingAllocator::merge(uint32_t dst, uint32_t src, bool index) {
  if (!mergeable_into(dst, src)) return false;
  Block& s = blocks[src];
  Block& d = blocks[dst];
  if (s.mapped) {
    if (index) take_free(src);
  } else {
    take_unmapped(src);
  }
  if (d.prev == src) {
    // dst now starts where src did: that start is pointed at dst below, so
    // only dst's old one is cleared.
    clear_start(d.addr, dst);
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNone) blocks[d.prev].next = dst;
    if (d.mapped) set_start(dst);
  } else {
    if (s.mapped) clear_start(s.addr, src);
    d.next = s.next;
    if (d.next != kNone) blocks[d.next].prev = dst;
  }
  d.size += s.size;
  if (d.va && spaces[d.va - 1].head == src) spaces[d.va - 1].head = dst;
  delete_block(src);
  return true;
}

uint32_t CachingAllocator::carve(uint32_t b, int64_t size, int64_t requested, bool split) {
  uint32_t out = b;
  if (!split) take_free(b);
  if (split) {
    FreeKey old = free_key(blocks[b]);
    out = new_block();
    Block& r = blocks[b];
    Block& n = blocks[out];
    n.addr = r.addr;
    n.size = size;
    n.stream = r.stream;
    n.pool = r.pool;
    n.va = r.va;
    n.prev = r.prev;
    n.next = b;
    if (r.prev != kNone) blocks[r.prev].next = out;
    if (r.va && spaces[r.va - 1].head == b) spaces[r.va - 1].head = out;
    r.prev = out;
    r.addr += size;
    r.size -= size;
    set_start(out);
    set_start(b);
    rekey(old, b);
  }
  Block& o = blocks[out];
  o.allocated = true;
  note_room(out);  // splits the run it was in
  o.requested = requested;
  now.allocated += o.size;
  now.active += o.size;
  now.requested += requested;
  return out;
}

uint32_t CachingAllocator::split_free(uint32_t b, int64_t addr) {
  take_free(b);
  uint32_t up = new_block();
  Block& lo = blocks[b];
  Block& hi = blocks[up];
  hi = lo;
  hi.addr = addr;
  hi.size = lo.addr + lo.size - addr;
  hi.prev = b;
  lo.next = up;
  lo.size = addr - lo.addr;
  if (hi.next != kNone) blocks[hi.next].prev = up;
  set_start(up);
  put_free(b);
  put_free(up);
  return up;
}

uint32_t CachingAllocator::add_detached(int64_t addr, int64_t size, int64_t requested,
                                        uint16_t stream) {
  uint32_t b = new_block(addr, size, 0, stream);
  Block& x = blocks[b];
  x.detached = true;
  x.allocated = true;
  x.requested = requested;
  set_start(b);
  now.allocated += size;
  detached_allocated += size;
  now.active += size;
  now.requested += requested;
  return b;
}

void CachingAllocator::free_requested(uint32_t b) {
  Block& x = blocks[b];
  if (!x.allocated) return;
  x.allocated = false;
  x.pending = true;
  now.allocated -= x.size;
  if (x.detached) detached_allocated -= x.size;
}

void CachingAllocator::free_block(uint32_t b) {
  free_requested(b);
  Block& x = blocks[b];
  x.pending = false;
  x.tag = kNone;
  now.active -= x.size;
  now.requested -= x.requested;
  if (x.detached) {
    clear_start(x.addr, b);
    delete_block(b);
    return;
  }
  // The merged block takes a neighbour's place in the index.
  uint32_t prev = x.prev, next = x.next;
  bool with_prev = mergeable_into(b, prev), with_next = mergeable_into(b, next);
  FreeKey old_prev = with_prev ? free_key(blocks[prev]) : FreeKey{},
          old_next = with_next ? free_key(blocks[next]) : FreeKey{};
  if (with_prev) merge(b, prev, false);
  if (with_next) merge(b, next, false);
  if (with_next) {
    rekey(old_next, b);
    if (with_prev) {
      Block& y = blocks[b];
      if (index_free_) pools[y.pool].free.erase(old_prev.hi, old_prev.lo);
    }
  } else if (with_prev) {
    rekey(old_prev, b);
  } else {
    put_free(b);
  }
}

void CachingAllocator::drop(uint32_t b) {
  Block& x = blocks[b];
  if (x.allocated) now.allocated -= x.size;
  if (x.allocated || x.pending) {
    now.active -= x.size;
    now.requested -= x.requested;
  }
  clear_start(x.addr, b);
  delete_block(b);
}

FreeSpace CachingAllocator::free_space() const {
  FreeSpace f;
  for (const Block& x : blocks) {
    if (!x.mergeable() || !x.mapped) continue;
    bool small = pools[x.pool].small;
    f.bytes += x.size;
    ++f.blocks;
    (small ? f.small_bytes : f.large_bytes) += x.size;
    int64_t& largest = small ? f.largest_small : f.largest_large;
    largest = std::max(largest, x.size);
    if (!x.va && !x.split()) f.releasable += x.size;
  }
  return f;
}

}  // namespace memsight::alloc
