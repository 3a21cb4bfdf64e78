// A model of CPython's setobject.c sufficient for insertion-only sets and
// set difference: the same hash (tuplehash over int hashes), the same table
// sizes, resize rule, linear probes and perturbation.
#include "analysis/torch_text/pyset_order.h"

namespace memsight {
namespace {

using Key = std::pair<int64_t, int64_t>;
constexpr size_t kLinearProbes = 9;
constexpr int kPerturbShift = 5;
constexpr size_t kMinSize = 8;

int64_t int_hash(int64_t v) {
  // hash(int) = v mod (2**61 - 1), sign kept; -1 is reserved and becomes -2.
  constexpr uint64_t kModulus = (uint64_t{1} << 61) - 1;
  uint64_t mag = v < 0 ? uint64_t(0) - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  auto h = static_cast<int64_t>(mag % kModulus);
  if (v < 0) h = -h;
  return h == -1 ? -2 : h;
}

int64_t tuple_hash(const Key& k) {
  constexpr uint64_t kP1 = 11400714785074694791ull, kP2 = 14029467366897019727ull,
                     kP5 = 2870177450012600261ull;
  uint64_t acc = kP5;
  for (int64_t item : {k.first, k.second}) {
    uint64_t lane = static_cast<uint64_t>(int_hash(item));
    acc += lane * kP2;
    acc = (acc << 31) | (acc >> 33);
    acc *= kP1;
  }
  acc += 2 ^ (kP5 ^ 3527539ull);
  if (acc == ~uint64_t{0}) return 1546275796;
  return static_cast<int64_t>(acc);
}

struct Entry {
  bool used = false;
  bool dummy = false;
  int64_t hash = 0;
  Key key;
};

class PySet {
 public:
  PySet() : table_(kMinSize) {}

  // CPython's lookup walk: runs of kLinearProbes slots, then a perturbed
  // jump. Returns the entry holding k, else the first never-used slot.
  Entry* probe(const Key& k, int64_t h) {
    size_t mask = table_.size() - 1, i = static_cast<size_t>(h) & mask;
    size_t perturb = static_cast<size_t>(h);
    while (true) {
      size_t probes = (i + kLinearProbes <= mask) ? kLinearProbes : 0;
      for (size_t j = i; j <= i + probes; ++j) {
        Entry& e = table_[j];
        if (!e.used && !e.dummy) return &e;
        if (e.used && e.hash == h && e.key == k) return &e;
      }
      perturb >>= kPerturbShift;
      i = (i * 5 + 1 + perturb) & mask;
    }
  }

  bool contains(const Key& k, int64_t h) { return probe(k, h)->used; }

  void add(const Key& k, int64_t h) {
    Entry* e = probe(k, h);
    if (e->used) return;
    size_t mask = table_.size() - 1;
    *e = Entry{true, false, h, k};
    ++fill_;
    ++used_;
    if (fill_ * 5 >= mask * 3) resize(used_ > 50000 ? used_ * 2 : used_ * 4);
  }

  void discard(const Key& k, int64_t h) {
    Entry* e = probe(k, h);
    if (!e->used) return;
    e->used = false;
    e->dummy = true;
    --used_;
  }

  // set_copy: an empty set merged with this one.
  PySet copy() const {
    PySet r;
    if ((r.fill_ + used_) * 5 >= (r.table_.size() - 1) * 3) r.resize((r.used_ + used_) * 2);
    if (r.table_.size() == table_.size() && fill_ == used_) {
      r.table_ = table_;  // same size and no dummies: slots copied as they are
    } else {
      for (const Entry& e : table_)
        if (e.used) r.insert_clean(e.key, e.hash);
    }
    r.fill_ = r.used_ = used_;
    return r;
  }

  size_t size() const { return used_; }
  const std::vector<Entry>& table() const { return table_; }

 private:
  void insert_clean(const Key& k, int64_t h) {
    size_t mask = table_.size() - 1, i = static_cast<size_t>(h) & mask;
    size_t perturb = static_cast<size_t>(h);
    while (true) {
      if (!table_[i].used) break;
      bool found = false;
      if (i + kLinearProbes <= mask) {
        for (size_t j = 0; j < kLinearProbes; ++j) {
          ++i;
          if (!table_[i].used) {
            found = true;
            break;
          }
        }
      }
      if (found) break;
      perturb >>= kPerturbShift;
      i = (i * 5 + 1 + perturb) & mask;
    }
    table_[i] = Entry{true, false, h, k};
  }

  void resize(size_t minused) {
    size_t newsize = kMinSize;
    while (newsize <= minused) newsize <<= 1;
    std::vector<Entry> old = std::move(table_);
    table_.assign(newsize, Entry{});
    for (const Entry& e : old)
      if (e.used) insert_clean(e.key, e.hash);
    fill_ = used_;
  }

  std::vector<Entry> table_;
  size_t fill_ = 0, used_ = 0;
};

PySet build(const std::vector<Key>& keys) {
  PySet s;
  for (const Key& k : keys) s.add(k, tuple_hash(k));
  return s;
}

}  // namespace

std::vector<Key> pyset_difference_order(const std::vector<Key>& a, const std::vector<Key>& b) {
  PySet sa = build(a), sb = build(b);
  std::vector<Key> out;
  if ((sa.size() >> 2) > sb.size()) {
    // set_copy_and_difference: copy a, then discard b's elements.
    PySet r = sa.copy();
    for (const Entry& e : sb.table())
      if (e.used) r.discard(e.key, e.hash);
    for (const Entry& e : r.table())
      if (e.used) out.push_back(e.key);
    return out;
  }
  PySet r;
  for (const Entry& e : sa.table())
    if (e.used && !sb.contains(e.key, e.hash)) r.add(e.key, e.hash);
  for (const Entry& e : r.table())
    if (e.used) out.push_back(e.key);
  return out;
}

}  // namespace memsight
