#include "memsight/label.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>

#include "memsight/error.h"

namespace memsight {

void append_shown(std::string& out, std::string_view s, size_t max) {
  if (s.size() <= max) {
    out += s;
    return;
  }
  size_t keep = max;
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xc0) == 0x80) --keep;
  out += s.substr(0, keep);
  out += "\u2026[+";
  out += std::to_string(s.size() - keep);
  out += " bytes]";
}

std::string shown_text(std::string_view s, size_t max) {
  std::string out;
  append_shown(out, s, max);
  return out;
}

Label& Label::add(std::string_view piece) {
  if (count_ == kMaxPieces) throw Error("internal: a label of too many pieces");
  // A null view would read as the number: an empty piece adds nothing.
  if (!piece.empty()) pieces_[count_++] = piece;
  return *this;
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
  for (size_t i = 0; i < count_; ++i) append_shown(out, piece(i), max_piece);
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
constexpr size_t kHashEnds = 32;

// Mixes up to n bytes of the text, from its start (forward) or its end.
template <class Get>
size_t mix(size_t h, size_t n, Get get) {
  for (size_t k = 0; k < n; ++k) h = (h ^ static_cast<unsigned char>(get(k))) * 1099511628211ull;
  return h;
}
}  // namespace

size_t Label::hash_text(std::string_view s) {
  size_t n = std::min(s.size(), kHashEnds);
  size_t h = std::hash<size_t>()(s.size()) ^ 14695981039346656037ull;
  h = mix(h, n, [&](size_t k) { return s[k]; });
  return mix(h, n, [&](size_t k) { return s[s.size() - 1 - k]; });
}

size_t Label::hash() const {
  size_t total = size();
  size_t n = std::min(total, kHashEnds);
  // The k-th byte from the start or the end of the spelled text.
  auto at = [&](size_t k, bool from_end) {
    size_t pos = from_end ? total - 1 - k : k;
    for (size_t i = 0; i < count_; ++i) {
      std::string_view p = piece(i);
      if (pos < p.size()) return p[pos];
      pos -= p.size();
    }
    return '\0';
  };
  size_t h = std::hash<size_t>()(total) ^ 14695981039346656037ull;
  h = mix(h, n, [&](size_t k) { return at(k, false); });
  return mix(h, n, [&](size_t k) { return at(k, true); });
}

}  // namespace memsight
