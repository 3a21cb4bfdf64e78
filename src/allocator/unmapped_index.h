#pragma once
// The unmapped ranges of a pool's expandable segments, ordered by stream,
// then address (the newest first among equal addresses, as a sorted insert
// before equals left them), each with a room: what an allocation could take
// from there (CachingAllocator::refresh_rooms keeps it). A treap whose
// nodes carry the largest room below them, so that find_expandable's "first
// range in address order with enough room" is one descent, not a scan of
// every range (which made n new expandable blocks among n ranges cost n^2).
#include <cstdint>
#include <vector>

namespace memsight::alloc {

class UnmappedIndex {
 public:
  static constexpr uint32_t kNil = UINT32_MAX;

  // Block `id` at (stream, addr), with no room; returns its handle.
  uint32_t insert(uint32_t stream, int64_t addr, uint32_t id);
  void erase(uint32_t handle);
  void set_room(uint32_t handle, int64_t room);
  // The block of the first range of `stream` with room >= size, or kNil.
  uint32_t first_with_room(uint32_t stream, int64_t size) const;
  // Calls f(addr, id) on the ranges of `stream` in order until it returns
  // true; returns that range's block, or kNil.
  template <class F>
  uint32_t find_in_stream(uint32_t stream, F f) const {
    std::vector<uint32_t> stack;
    Key lo{stream, INT64_MIN, 0};
    for (uint32_t t = root_; t != kNil;) {  // the path to the lower bound
      if (less(nodes_[t].key, lo)) {
        t = nodes_[t].r;
      } else {
        stack.push_back(t);
        t = nodes_[t].l;
      }
    }
    while (!stack.empty()) {
      uint32_t t = stack.back();
      stack.pop_back();
      const Node& n = nodes_[t];
      if (n.key.stream != stream) return kNil;
      if (f(n.key.addr, n.id)) return n.id;
      for (uint32_t c = n.r; c != kNil; c = nodes_[c].l) stack.push_back(c);
    }
    return kNil;
  }

 private:
  struct Key {
    uint32_t stream;
    int64_t addr;
    uint64_t order;  // falls as entries are added: the newest first among equals
  };
  struct Node {
    Key key;
    int64_t room = -1, best = -1;  // best: the largest room in the subtree
    uint32_t id = 0, prio = 0, l = kNil, r = kNil;
  };
  static bool less(const Key& a, const Key& b) {
    if (a.stream != b.stream) return a.stream < b.stream;
    if (a.addr != b.addr) return a.addr < b.addr;
    return a.order < b.order;
  }
  void pull(uint32_t t);
  // Splits t into the keys below k and the rest.
  void split(uint32_t t, const Key& k, uint32_t& lo, uint32_t& hi);
  uint32_t join(uint32_t a, uint32_t b);
  uint32_t erase_at(uint32_t t, const Key& k);
  void set_at(uint32_t t, const Key& k, int64_t room);
  uint32_t first_at(uint32_t t, const Key& lo, int64_t size) const;

  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  uint32_t root_ = kNil;
  uint64_t order_ = UINT64_MAX;
  uint32_t seed_ = 2463534242u;
};

}  // namespace memsight::alloc
