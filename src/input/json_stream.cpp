#include "input/json_stream.h"

#include <array>
#include <cmath>
#include <cstring>

#include "memsight/error.h"
#include "util/escape.h"
#include "util/float_chars.h"

namespace memsight::json {
namespace {

constexpr size_t kChunk = 1 << 20;
constexpr uint64_t kReleaseEvery = 1 << 20;  // small: up to 32 threads each hold this much
constexpr int kMaxDepth = 64;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

Reader::Reader(ByteSource& src) : src_(src) {
  std::string_view m = src.mapped();
  if (!m.empty()) {
    data_ = m;
    mapped_ = true;
    eof_ = true;
  }
}

[[noreturn]] void Reader::fail(const std::string& what) const {
  throw Error("malformed JSON at byte " + std::to_string(offset()) + ": " + what);
}

bool Reader::fill(size_t need) {
  if (pos_ + need <= data_.size()) return true;
  if (mapped_) return false;
  if (eof_) return false;
  // Keep only what is not yet consumed, then read until enough is there.
  buf_.erase(0, pos_);
  base_ += pos_;
  pos_ = 0;
  while (buf_.size() < need && !eof_) {
    size_t old = buf_.size();
    buf_.resize(old + kChunk);
    size_t got = src_.read(buf_.data() + old, kChunk);
    buf_.resize(old + got);
    if (got == 0) eof_ = true;
  }
  data_ = buf_;
  return buf_.size() >= need;
}

char Reader::peek_char_refill() {
  for (;;) {
    if (!fill(1)) throw Error("truncated JSON at byte " + std::to_string(offset()));
    while (pos_ < data_.size()) {
      char c = data_[pos_];
      if (!is_space(c)) return c;
      ++pos_;
    }
  }
}

char Reader::next_char() {
  char c = peek_char();
  ++pos_;
  return c;
}

void Reader::expect(char c) {
  char got = next_char();
  if (got != c) {
    --pos_;
    fail(std::string("expected '") + c + "'");
  }
}

Kind Reader::peek() {
  switch (peek_char()) {
    case '{':
      return Kind::Object;
    case '[':
      return Kind::Array;
    case '"':
      return Kind::String;
    case 't':
      return Kind::True;
    case 'f':
      return Kind::False;
    case 'n':
      return Kind::Null;
    default: {
      char c = peek_char();
      if (c == '-' || (c >= '0' && c <= '9')) return Kind::Number;
      fail("unexpected character");
    }
  }
}

void Reader::begin_object() {
  expect('{');
  if (++depth_ > kMaxDepth) fail("nested deeper than 64 levels");
  first_bits_ |= uint64_t{1} << (depth_ - 1);
}

void Reader::begin_array() {
  expect('[');
  if (++depth_ > kMaxDepth) fail("nested deeper than 64 levels");
  first_bits_ |= uint64_t{1} << (depth_ - 1);
}

void Reader::end_of_container(char close) {
  ++pos_;  // the closing bracket, already peeked
  (void)close;
  first_bits_ &= ~(uint64_t{1} << (depth_ - 1));
  --depth_;
}

// Before an item of the container at depth_: its ',' (none before the
// first); false, with the container closed, at the closing bracket.
bool Reader::before_item(char close) {
  if (mapped_ && offset() - released_ >= kReleaseEvery) {  // give back what is behind
    uint64_t upto = offset() & ~(kReleaseEvery - 1);
    src_.drop(released_, upto);  // only this reader's own range: safe beside other readers
    released_ = upto;
  }
  char c = peek_char();
  uint64_t bit = uint64_t{1} << (depth_ - 1);
  if (c == close) {
    end_of_container(close);
    return false;
  }
  if (first_bits_ & bit) {
    first_bits_ &= ~bit;
  } else {
    if (c != ',') fail(std::string("expected ',' or '") + close + "'");
    ++pos_;
  }
  return true;
}

bool Reader::next_key(std::string& key) {
  std::string_view k;
  if (!next_key_view(k)) return false;
  key.assign(k);
  return true;
}

bool Reader::next_key_view(std::string_view& key) {
  if (!before_item('}')) return false;
  if (peek_char() != '"') fail("expected a key");
  key = string_view();
  if (!mapped_ && (pos_ >= data_.size() || data_[pos_] != ':')) {
    key_ = key;  // reading on to the ':' may move the window under the view
    key = key_;
  }
  if (peek_char() != ':') fail("expected ':'");
  ++pos_;
  return true;
}

bool Reader::next_item() { return before_item(']'); }

std::string_view Reader::string_view() {
  if (peek_char() != '"') fail("expected '\"'");
  // Fast path: no escape before the closing quote, all of it in view.
  const char* begin = data_.data() + pos_ + 1;
  const char* end = data_.data() + data_.size();
  if (begin <= end) {
    auto* q = static_cast<const char*>(std::memchr(begin, '"', static_cast<size_t>(end - begin)));
    if (q && !std::memchr(begin, '\\', static_cast<size_t>(q - begin))) {
      // (written so the compiler checks 16+ bytes at a time)
      const auto* u = reinterpret_cast<const unsigned char*>(begin);
      size_t len = static_cast<size_t>(q - begin);
      unsigned char control = 0, high = 0;
      for (size_t k = 0; k < len; ++k) {
        control |= static_cast<unsigned char>(u[k] < 0x20);
        high |= u[k];
      }
      if (!control) {
        std::string_view text(begin, len);
        if (high >= 0x80) check_utf8(text, offset());
        pos_ = static_cast<size_t>(q - data_.data()) + 1;
        return text;
      }
    }
  }
  string(scratch_);
  return scratch_;
}

// JSON text is UTF-8 (RFC 8259), and what is kept must be (the page and
// the JSON output write it back): a string that is not is an error at its
// opening quote, byte `at`.
void Reader::check_utf8(std::string_view text, uint64_t at) const {
  if (!is_utf8(text, /*surrogates=*/false))
    throw Error("malformed JSON at byte " + std::to_string(at) +
                ": the string there is not valid UTF-8 (JSON text must be)");
}

void Reader::string(std::string& out) {
  expect('"');
  out.clear();
  const uint64_t start = offset() - 1;  // the opening quote
  bool high = false;
  for (;;) {
    size_t from = pos_;
    while (pos_ < data_.size()) {
      char c = data_[pos_];
      if (c == '"' || c == '\\') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      high |= static_cast<unsigned char>(c) >= 0x80;
      ++pos_;
    }
    out.append(data_.data() + from, pos_ - from);
    if (pos_ >= data_.size()) {  // ran out before the quote: read on
      if (!fill(1)) throw Error("truncated JSON at byte " + std::to_string(offset()));
      continue;
    }
    char c = data_[pos_++];
    if (c == '"') {
      if (high) check_utf8(out, start);
      return;
    }
    // an escape
    if (!fill(1)) throw Error("truncated JSON at byte " + std::to_string(offset()));
    char e = data_[pos_++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        auto hex4 = [&]() -> uint32_t {
          if (!fill(4)) throw Error("truncated JSON at byte " + std::to_string(offset()));
          uint32_t v = 0;
          for (int i = 0; i < 4; ++i) {
            char h = data_[pos_++];
            v <<= 4;
            if (h >= '0' && h <= '9')
              v |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f')
              v |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              v |= static_cast<uint32_t>(h - 'A' + 10);
            else
              fail("bad \\u escape");
          }
          return v;
        };
        uint32_t cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00 && fill(2) && data_[pos_] == '\\' &&
            data_[pos_ + 1] == 'u') {
          pos_ += 2;
          uint32_t lo = hex4();
          if (lo >= 0xDC00 && lo < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          else
            cp = 0xFFFD;
        } else if (cp >= 0xD800 && cp < 0xE000) {
          cp = 0xFFFD;  // a lone surrogate: the replacement character
        }
        append_utf8(out, cp);
        break;
      }
      default:
        fail("bad escape");
    }
  }
}

double Reader::number() {
  peek_char();
  // Fast path: [-]digits[.digits], at most 18 digits, all in view.
  {
    static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8, 1e9,
                                        1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};
    size_t i = pos_, n = data_.size();
    bool neg = i < n && data_[i] == '-';
    i += neg;
    uint64_t m = 0;
    int digits = 0, frac = -1;
    for (; i < n; ++i) {
      char c = data_[i];
      if (c >= '0' && c <= '9') {
        m = m * 10 + static_cast<uint64_t>(c - '0');
        ++digits;
        if (frac >= 0) ++frac;
      } else if (c == '.' && frac < 0) {
        frac = 0;
      } else {
        break;
      }
    }
    bool ends = i < n && data_[i] != 'e' && data_[i] != 'E' && data_[i] != '.';
    if (ends && digits > 0 && digits <= 18 && frac != 0) {
      pos_ = i;
      double v = static_cast<double>(m);
      if (frac > 0) v /= kPow10[frac];
      return neg ? -v : v;
    }
  }
  char tmp[64];
  size_t n = 0;
  for (;;) {
    while (pos_ < data_.size()) {
      char c = data_[pos_];
      if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'))
        goto done;
      if (n == sizeof tmp) fail("number too long");
      tmp[n++] = c;
      ++pos_;
    }
    if (!fill(1)) break;
  }
done:
  double v = 0;
  if (n == 0 || !parse_double(std::string_view(tmp, n), v)) fail("bad number");
  return v;
}

int64_t Reader::integer() {
  double v = number();
  if (!(std::fabs(v) <= 9.2e18) || v != std::floor(v)) fail("expected an integer");
  return static_cast<int64_t>(v);
}

void Reader::literal(std::string_view word) {
  if (!fill(word.size()) || data_.substr(pos_, word.size()) != word) fail("bad literal");
  pos_ += word.size();
}

bool Reader::boolean() {
  if (peek_char() == 't') {
    literal("true");
    return true;
  }
  literal("false");
  return false;
}

void Reader::null() {
  peek_char();
  literal("null");
}

void Reader::skip() {
  char c = peek_char();
  if (c == '"') {
    string_view();
    return;
  }
  if (c == 't' || c == 'f') {
    boolean();
    return;
  }
  if (c == 'n') {
    null();
    return;
  }
  if (c != '{' && c != '[') {
    number();  // checked, not kept
    return;
  }
  // A container: count brackets outside strings; nothing is kept. Inside a
  // string only its closing quote matters (found with memchr, then checked
  // for an escaping backslash); outside, only brackets and quotes.
  static const auto kStructural = [] {
    std::array<bool, 256> t{};
    for (unsigned char c : std::string_view("\"{}[]")) t[c] = true;
    return t;
  }();
  size_t depth = 0;
  bool in_string = false;
  for (;;) {
    const char* p = data_.data();
    size_t n = data_.size(), i = pos_;
    while (i < n) {
      if (in_string) {
        // The next quote, unless a backslash comes first: then step over
        // the escape (both bytes must be in view) and look again.
        auto* q = static_cast<const char*>(std::memchr(p + i, '"', n - i));
        size_t upto = q ? static_cast<size_t>(q - p) : n;
        auto* b = static_cast<const char*>(std::memchr(p + i, '\\', upto - i));
        if (b) {
          i = static_cast<size_t>(b - p);
          if (i + 1 >= n) break;  // the escaped byte is in the next read
          i += 2;
          continue;
        }
        i = upto;
        if (!q) break;
        ++i;
        in_string = false;
        continue;
      }
      while (i < n && !kStructural[static_cast<unsigned char>(p[i])]) ++i;
      if (i == n) break;
      char ch = p[i++];
      if (ch == '"') {
        in_string = true;
      } else if (ch == '{' || ch == '[') {
        ++depth;
      } else if (--depth == 0) {
        pos_ = i;
        return;
      }
    }
    pos_ = i;
    // An escape split from its byte needs both; otherwise any more input.
    if (!fill(i < n ? 2 : 1)) throw Error("truncated JSON at byte " + std::to_string(offset()));
  }
}

void Reader::scalar_text(std::string& out) {
  switch (peek()) {
    case Kind::String:
      string(out);
      return;
    case Kind::Number: {
      out = shortest_text(number());
      return;
    }
    case Kind::True:
    case Kind::False:
      out = boolean() ? "true" : "false";
      return;
    case Kind::Null:
      null();
      out.clear();
      return;
    default:
      skip();
      out.clear();
  }
}

void Reader::enter_array_at(size_t pos) {
  if (!mapped_ || pos > data_.size() || depth_ >= kMaxDepth) fail("cannot read from there");
  pos_ = pos;
  released_ = pos;
  ++depth_;
  first_bits_ |= uint64_t{1} << (depth_ - 1);
}

void Reader::seek_item(size_t pos) {
  if (!mapped_ || pos > data_.size() || depth_ == 0) fail("cannot read from there");
  pos_ = pos;
  released_ = std::max<uint64_t>(released_, pos & ~(kReleaseEvery - 1));
  first_bits_ |= uint64_t{1} << (depth_ - 1);
}

void Reader::leave_array_at(size_t pos) {
  if (!mapped_ || pos > data_.size() || depth_ == 0) fail("cannot read from there");
  pos_ = pos;
  first_bits_ &= ~(uint64_t{1} << (depth_ - 1));
  --depth_;
}

size_t Reader::next_item_at() {
  if (!before_item(']')) return std::string_view::npos;
  peek_char();
  return pos_;
}

void Reader::finish() {
  for (;;) {
    while (pos_ < data_.size()) {
      if (!is_space(data_[pos_])) fail("unexpected data after the end");
      ++pos_;
    }
    if (!fill(1)) return;
  }
}

}  // namespace memsight::json
