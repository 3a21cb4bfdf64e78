#pragma once
// An ordered set of free blocks, as torch's BlockPool::blocks orders them:
// by stream, then size, then address, so that the lower bound of (stream,
// size) is the best fit. Sorted chunks of at most kMax entries: a pool
// holds a few hundred free blocks in a typical run, where one sorted array
// beats a tree by far, and chunking keeps a fragmented cache of tens of
// thousands cheap too.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace memsight::alloc {

class FreeSet {
 public:
  struct Entry {
    uint64_t hi;  // stream rank << 48 | size
    uint64_t lo;  // address
    uint32_t id;  // block
  };
  struct Pos {
    uint32_t chunk = 0, i = 0;
  };
  static uint64_t hi_of(uint32_t stream, int64_t size) {
    return uint64_t{stream} << 48 | static_cast<uint64_t>(size);
  }

  size_t size() const { return size_; }
  Pos end() const { return {static_cast<uint32_t>(chunks_.size()), 0}; }
  bool at_end(Pos p) const { return p.chunk >= chunks_.size(); }
  const Entry& at(Pos p) const { return chunks_[p.chunk][p.i]; }
  Pos next(Pos p) const {
    if (++p.i >= chunks_[p.chunk].size()) p = {p.chunk + 1, 0};
    return p;
  }
  // The entry before p; p must not be the first.
  Pos prev(Pos p) const {
    if (p.i > 0) return {p.chunk, p.i - 1};
    uint32_t c = p.chunk - 1;
    return {c, static_cast<uint32_t>(chunks_[c].size() - 1)};
  }
  bool is_first(Pos p) const { return p.chunk == 0 && p.i == 0; }

  // The first entry not less than (hi, lo).
  Pos lower_bound(uint64_t hi, uint64_t lo) const {
    auto c = chunk_for(hi, lo, chunks_.begin(), chunks_.end());
    if (c == chunks_.end()) return end();
    auto e =
        std::partition_point(c->begin(), c->end(), [&](const Entry& x) { return less(x, hi, lo); });
    found_ = {static_cast<uint32_t>(c - chunks_.begin()), static_cast<uint32_t>(e - c->begin())};
    return found_;
  }

  void insert(uint64_t hi, uint64_t lo, uint32_t id) {
    ++size_;
    if (chunks_.empty()) {
      chunks_.emplace_back();
      chunks_.back().reserve(kMax);
    }
    auto c = chunk_for(hi, lo, chunks_.begin(), chunks_.end() - 1);
    auto e =
        std::partition_point(c->begin(), c->end(), [&](const Entry& x) { return less(x, hi, lo); });
    c->insert(e, Entry{hi, lo, id});
    if (c->size() >= kMax) {
      Chunk upper(c->begin() + kMax / 2, c->end());
      c->resize(kMax / 2);
      upper.reserve(kMax);
      chunks_.insert(c + 1, std::move(upper));
    }
  }

  // Gives entry (ohi, olo) the key (nhi, nlo) and the id `id`: one shift of
  // the entries between its old and new places, where an erase and an
  // insert would move everything after both (a carved block's rest, a
  // merged block).
  void rekey(uint64_t ohi, uint64_t olo, uint64_t nhi, uint64_t nlo, uint32_t id) {
    Pos p = find(ohi, olo);
    if (chunks_.size() != 1 || at_end(p) || at(p).hi != ohi || at(p).lo != olo) {
      erase(ohi, olo);
      return insert(nhi, nlo, id);
    }
    Chunk& c = chunks_[0];
    auto old = c.begin() + p.i;
    Entry e{nhi, nlo, id};
    if (less(e, ohi, olo)) {  // moves down
      auto to =
          std::partition_point(c.begin(), old, [&](const Entry& x) { return less(x, nhi, nlo); });
      std::move_backward(to, old, old + 1);
      *to = e;
    } else {
      auto to =
          std::partition_point(old + 1, c.end(), [&](const Entry& x) { return less(x, nhi, nlo); });
      std::move(old + 1, to, old);
      *(to - 1) = e;
    }
  }

  // Removes the entry (hi, lo); returns whether it was there.
  bool erase(uint64_t hi, uint64_t lo) {
    Pos p = find(hi, lo);
    if (at_end(p) || at(p).hi != hi || at(p).lo != lo) return false;
    Chunk& ch = chunks_[p.chunk];
    ch.erase(ch.begin() + p.i);
    if (ch.empty()) chunks_.erase(chunks_.begin() + p.chunk);
    --size_;
    return true;
  }

  // The largest block's size: the last entry of each stream (a handful),
  // so that noting it at every new peak does not walk every free block.
  int64_t largest() const {
    constexpr uint64_t kSize = (uint64_t{1} << 48) - 1;
    uint64_t best = 0;
    for (Pos p = end(); size_ > 0 && !is_first(p);) {
      const Entry& e = at(prev(p));
      best = std::max(best, e.hi & kSize);
      p = lower_bound(e.hi & ~kSize, 0);  // the stream's first entry
    }
    return static_cast<int64_t>(best);
  }

  template <typename F>
  void for_each(F&& f) const {
    for (const Chunk& ch : chunks_)
      for (const Entry& e : ch) f(e);
  }

 private:
  using Chunk = std::vector<Entry>;
  // Where (hi, lo) is, or where it would go. A best-fit search finds a
  // block, then the allocator takes it: the position found last is tried
  // first.
  Pos find(uint64_t hi, uint64_t lo) const {
    const Pos p = found_;
    if (p.chunk < chunks_.size() && p.i < chunks_[p.chunk].size() && at(p).hi == hi &&
        at(p).lo == lo)
      return p;
    return lower_bound(hi, lo);
  }
  mutable Pos found_;
  static constexpr size_t kMax = 512;
  // The first chunk in [begin, last) whose last entry is not less than the
  // key, else last.
  template <typename It>
  static It chunk_for(uint64_t hi, uint64_t lo, It first, It last) {
    if (last - first <= 1) return first != last && less(first->back(), hi, lo) ? last : first;
    return std::partition_point(first, last,
                                [&](const Chunk& ch) { return less(ch.back(), hi, lo); });
  }
  static bool less(const Entry& x, uint64_t hi, uint64_t lo) {
    return x.hi < hi || (x.hi == hi && x.lo < lo);
  }
  std::vector<Chunk> chunks_;
  size_t size_ = 0;
};

}  // namespace memsight::alloc
