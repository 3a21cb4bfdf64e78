#pragma once
// The address ranges the model of the driver has released
// (segment_addresses.h): disjoint [start, end), merged when they touch, and
// the highest one that holds a given size found in a lookup. A scan from the
// top for it made a history of n new segments among n small released
// ranges cost n^2 (issue 34, item 3).
//
// Ranges are kept twice: by start in a map (neighbours, overlaps) and in a
// treap by start whose nodes know the longest range beneath them, so the
// highest range of at least a length is one walk down.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace memsight::alloc {

class ReleasedRanges {
 public:
  using Map = std::map<int64_t, int64_t>;  // start -> end

  const Map& ranges() const { return by_start_; }

  // [start, end) is released: merged with the ranges it touches.
  void release(int64_t start, int64_t end) {
    if (auto next = by_start_.find(end); next != by_start_.end()) {
      end = next->second;
      erase(next);
    }
    if (auto it = by_start_.lower_bound(start); it != by_start_.begin()) {
      if (auto prev = std::prev(it); prev->second == start) {
        start = prev->first;
        erase(prev);
      }
    }
    insert(start, end);
  }

  // [start, end) is reserved again: out of the released ranges.
  void take(int64_t start, int64_t end) {
    auto it = by_start_.upper_bound(start);
    if (it != by_start_.begin()) --it;
    while (it != by_start_.end() && it->first < end) {
      auto [s, e] = *it;
      if (e <= start) {
        ++it;
        continue;
      }
      it = erase(it);
      if (s < start) insert(s, start);
      if (end < e) it = std::next(insert(end, e));
    }
  }

  // The highest released range at least `length` long.
  std::optional<std::pair<int64_t, int64_t>> highest_holding(int64_t length) const {
    uint32_t n = root_;
    while (n != kNil && nodes_[n].longest >= length) {
      const Node& x = nodes_[n];
      if (x.right != kNil && nodes_[x.right].longest >= length) {
        n = x.right;
      } else if (x.end - x.start >= length) {
        return std::make_pair(x.start, x.end);
      } else {
        n = x.left;
      }
    }
    return std::nullopt;
  }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    int64_t start, end, longest;  // longest: of this node's subtree
    uint32_t priority, left, right;
  };

  Map::iterator insert(int64_t start, int64_t end) {
    uint32_t n;
    if (!free_.empty()) {
      n = free_.back();
      free_.pop_back();
    } else {
      n = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    seed_ ^= seed_ << 13, seed_ ^= seed_ >> 17, seed_ ^= seed_ << 5;  // xorshift
    nodes_[n] = {start, end, end - start, seed_, kNil, kNil};
    auto [lo, hi] = split(root_, start);
    root_ = merge(merge(lo, n), hi);
    return by_start_.emplace(start, end).first;
  }

  Map::iterator erase(Map::iterator it) {
    auto [lo, rest] = split(root_, it->first);
    auto [one, hi] = split(rest, it->first + 1);
    if (one != kNil) free_.push_back(one);
    root_ = merge(lo, hi);
    return by_start_.erase(it);
  }

  void update(uint32_t n) {
    Node& x = nodes_[n];
    x.longest = x.end - x.start;
    if (x.left != kNil) x.longest = std::max(x.longest, nodes_[x.left].longest);
    if (x.right != kNil) x.longest = std::max(x.longest, nodes_[x.right].longest);
  }

  // (starts below `key`, the rest). Recursion depth: the treap's height,
  // O(log n) expected.
  std::pair<uint32_t, uint32_t> split(uint32_t n, int64_t key) {
    if (n == kNil) return {kNil, kNil};
    if (nodes_[n].start < key) {
      auto [lo, hi] = split(nodes_[n].right, key);
      nodes_[n].right = lo;
      update(n);
      return {n, hi};
    }
    auto [lo, hi] = split(nodes_[n].left, key);
    nodes_[n].left = hi;
    update(n);
    return {lo, n};
  }

  uint32_t merge(uint32_t a, uint32_t b) {  // every start of a below b's
    if (a == kNil) return b;
    if (b == kNil) return a;
    if (nodes_[a].priority > nodes_[b].priority) {
      nodes_[a].right = merge(nodes_[a].right, b);
      update(a);
      return a;
    }
    nodes_[b].left = merge(a, nodes_[b].left);
    update(b);
    return b;
  }

  Map by_start_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  uint32_t root_ = kNil;
  uint32_t seed_ = 2463534242u;
};

}  // namespace memsight::alloc
