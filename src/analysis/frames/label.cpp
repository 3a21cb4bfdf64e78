#include "memsight/label.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>

#include "memsight/error.h"

namespace memsight {

Label& Label::add(std::string_view piece) {
  if (count_ == kMaxPieces) throw Error("internal: a label of too many pieces");
  // A null view would read as the number: an empty piece adds nothing.
  if (!piece.empty()) pieces_[count_++] = piece;
  return *this;
}

Label& Label::add(std::string_view piece, uint64_t piece_hash) {
  if (piece.empty()) return *this;
  hashes_[count_] = piece_hash;
  known_ |= static_cast<uint8_t>(1u << count_);
  return add(piece);
}

Label& Label::add(int64_t number) {
  if (count_ == kMaxPieces || digits_size_) throw Error("internal: a label of too many pieces");
  auto res = std::to_chars(digits_, digits_ + sizeof digits_, number);
  digits_size_ = static_cast<uint8_t>(res.ptr - digits_);
  pieces_[count_++] = std::string_view();
  return *this;
}

size_t Label::size() const {
  size_t n = 0;
  for (size_t i = 0; i < count_; ++i) n += piece(i).size();
  return n;
}

void Label::append_to(std::string& out, size_t max_piece) const {
  for (size_t i = 0; i < count_; ++i) append_cut_name(out, piece(i), max_piece);
}

std::string Label::text(size_t max_piece) const {
  std::string out;
  append_to(out, max_piece);
  return out;
}

int Label::compare(const Label& o) const {
  size_t i = 0, j = 0;
  std::string_view a = count_ ? piece(0) : std::string_view();
  std::string_view b = o.count_ ? o.piece(0) : std::string_view();
  while (true) {
    while (a.empty() && ++i < count_) a = piece(i);
    while (b.empty() && ++j < o.count_) b = o.piece(j);
    if (a.empty() || b.empty()) return a.empty() ? (b.empty() ? 0 : -1) : 1;
    size_t k = std::min(a.size(), b.size());
    // The same string viewed by both (one name in many frames) is equal.
    if (a.data() != b.data())
      if (int c = std::memcmp(a.data(), b.data(), k)) return c < 0 ? -1 : 1;
    a.remove_prefix(k);
    b.remove_prefix(k);
  }
}

bool Label::spells(std::string_view s) const {
  for (size_t i = 0; i < count_; ++i) {
    std::string_view p = piece(i);
    if (s.substr(0, p.size()) != p) return false;
    s.remove_prefix(p.size());
  }
  return s.empty();
}

namespace {

// Polynomial hashing mod the Mersenne prime 2^61 - 1: the hash of a text
// a+b is hash(a) * B^|b| + hash(b), so pieces combine whatever the split.
constexpr uint64_t kMod = (uint64_t{1} << 61) - 1;
constexpr uint64_t kBase = 0x1d2c3b4a59687f1ull % kMod;

uint64_t mul(uint64_t a, uint64_t b) {
  unsigned __int128 x = static_cast<unsigned __int128>(a) * b;
  uint64_t r = static_cast<uint64_t>(x & kMod) + static_cast<uint64_t>(x >> 61);
  return r >= kMod ? r - kMod : r;
}

uint64_t add_mod(uint64_t a, uint64_t b) {
  uint64_t r = a + b;
  return r >= kMod ? r - kMod : r;
}

uint64_t power(uint64_t n) {  // kBase^n
  uint64_t r = 1, b = kBase;
  for (; n; n >>= 1, b = mul(b, b))
    if (n & 1) r = mul(r, b);
  return r;
}

// x < 2^64, reduced mod kMod.
uint64_t reduce(uint64_t x) {
  uint64_t r = (x & kMod) + (x >> 61);
  return r >= kMod ? r - kMod : r;
}

struct Powers {
  uint64_t p[9];  // kBase^0 .. kBase^8
  Powers() {
    p[0] = 1;
    for (int i = 1; i <= 8; ++i) p[i] = mul(p[i - 1], kBase);
  }
};
const Powers kPow;

}  // namespace

uint64_t Label::hash_text(std::string_view s) {
  // h = h * B + (c + 1) per byte, eight bytes a step: h * B^8 plus each
  // byte's term, whose products do not wait on each other (a long name is
  // hashed several times faster). Sums of four reduced terms stay below 2^63.
  const auto* q = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  uint64_t h = 0;
  const uint64_t* P = kPow.p;
  for (; n >= 8; n -= 8, q += 8) {
    uint64_t a =
        mul(q[0] + 1u, P[7]) + mul(q[1] + 1u, P[6]) + mul(q[2] + 1u, P[5]) + mul(q[3] + 1u, P[4]);
    uint64_t b = mul(q[4] + 1u, P[3]) + mul(q[5] + 1u, P[2]) + mul(q[6] + 1u, P[1]) + q[7] + 1u;
    h = reduce(reduce(a + mul(h, P[8])) + b);
  }
  for (; n; --n, ++q) h = add_mod(mul(h, kBase), *q + 1u);
  return h;
}

size_t Label::hash() const {
  uint64_t h = 0;
  for (size_t i = 0; i < count_; ++i) {
    std::string_view p = piece(i);
    uint64_t ph = (known_ >> i) & 1 ? hashes_[i] : hash_text(p);
    h = add_mod(mul(h, power(p.size())), ph);
  }
  return static_cast<size_t>(h);
}

}  // namespace memsight
