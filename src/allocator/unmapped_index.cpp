// The unmapped ranges' treap (see unmapped_index.h). Priorities come from
// a fixed xorshift sequence, so runs are deterministic.
#include "allocator/unmapped_index.h"

#include <algorithm>

namespace memsight::alloc {

uint32_t UnmappedIndex::insert(uint32_t stream, int64_t addr, uint32_t id) {
  seed_ ^= seed_ << 13;
  seed_ ^= seed_ >> 17;
  seed_ ^= seed_ << 5;
  Node n;
  n.key = {stream, addr, order_--};
  n.id = id;
  n.prio = seed_;
  uint32_t h;
  if (!free_.empty()) {
    h = free_.back();
    free_.pop_back();
    nodes_[h] = n;
  } else {
    h = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(n);
  }
  uint32_t lo, hi;
  split(root_, n.key, lo, hi);
  root_ = join(join(lo, h), hi);
  return h;
}

void UnmappedIndex::erase(uint32_t handle) {
  root_ = erase_at(root_, nodes_[handle].key);
  free_.push_back(handle);
}

void UnmappedIndex::set_room(uint32_t handle, int64_t room) {
  if (nodes_[handle].room != room) set_at(root_, nodes_[handle].key, room);
}

uint32_t UnmappedIndex::first_with_room(uint32_t stream, int64_t size) const {
  uint32_t t = first_at(root_, Key{stream, INT64_MIN, 0}, size);
  return t != kNil && nodes_[t].key.stream == stream ? nodes_[t].id : kNil;
}

void UnmappedIndex::pull(uint32_t t) {
  Node& n = nodes_[t];
  n.best = n.room;
  if (n.l != kNil) n.best = std::max(n.best, nodes_[n.l].best);
  if (n.r != kNil) n.best = std::max(n.best, nodes_[n.r].best);
}

void UnmappedIndex::split(uint32_t t, const Key& k, uint32_t& lo, uint32_t& hi) {
  if (t == kNil) {
    lo = hi = kNil;
    return;
  }
  if (less(nodes_[t].key, k)) {
    split(nodes_[t].r, k, nodes_[t].r, hi);
    lo = t;
  } else {
    split(nodes_[t].l, k, lo, nodes_[t].l);
    hi = t;
  }
  pull(t);
}

uint32_t UnmappedIndex::join(uint32_t a, uint32_t b) {
  if (a == kNil) return b;
  if (b == kNil) return a;
  if (nodes_[a].prio > nodes_[b].prio) {
    nodes_[a].r = join(nodes_[a].r, b);
    pull(a);
    return a;
  }
  nodes_[b].l = join(a, nodes_[b].l);
  pull(b);
  return b;
}

uint32_t UnmappedIndex::erase_at(uint32_t t, const Key& k) {
  if (t == kNil) return kNil;
  Node& n = nodes_[t];
  if (less(k, n.key)) {
    n.l = erase_at(n.l, k);
  } else if (less(n.key, k)) {
    n.r = erase_at(n.r, k);
  } else {
    return join(n.l, n.r);
  }
  pull(t);
  return t;
}

void UnmappedIndex::set_at(uint32_t t, const Key& k, int64_t room) {
  if (t == kNil) return;
  Node& n = nodes_[t];
  if (less(k, n.key))
    set_at(n.l, k, room);
  else if (less(n.key, k))
    set_at(n.r, k, room);
  else
    n.room = room;
  pull(t);
}

// The first node at or after lo with room >= size: subtrees whose best
// falls short are skipped whole, so this is one path down and at most one
// more.
uint32_t UnmappedIndex::first_at(uint32_t t, const Key& lo, int64_t size) const {
  if (t == kNil || nodes_[t].best < size) return kNil;
  const Node& n = nodes_[t];
  if (less(n.key, lo)) return first_at(n.r, lo, size);
  uint32_t x = first_at(n.l, lo, size);
  if (x != kNil) return x;
  if (n.room >= size) return t;
  return first_at(n.r, lo, size);
}

}  // namespace memsight::alloc
