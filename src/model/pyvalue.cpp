#include "memsight/pyvalue.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/escape.h"
#include "util/float_chars.h"

namespace memsight {

const PyValue* PyValue::get(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  for (size_t i = 0; i + 1 < items.size(); i += 2)
    if (items[i].kind == Kind::Str && items[i].s == key) return &items[i + 1];
  return nullptr;
}

void PyValue::set(std::string_view key, PyValue value) {
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].kind == Kind::Str && items[i].s == key) {
      items.at_mut(i + 1) = std::move(value);
      return;
    }
  }
  items.push_back(PyValue::str(key));
  items.push_back(std::move(value));
}

namespace {

// Decodes one UTF-8 code point; invalid bytes come back as themselves
// (Python would have refused them when pickling, so this only matters for
// hand-made input, which must not crash us).
uint32_t next_code_point(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
  if (extra <= 0 || i + static_cast<size_t>(extra) >= s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = c & (0x3f >> extra);
  for (int k = 1; k <= extra; ++k) {
    auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc >> 6) != 2) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3f);
  }
  i += static_cast<size_t>(extra) + 1;
  return cp;
}

// An approximation of str.isprintable() for non-ASCII code points: Unicode
// "Other" and "Separator" characters (C1 controls, the non-ASCII spaces,
// format characters, surrogates) are escaped, everything else is kept.
bool printable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp >= 0x80 && cp <= 0xa0) return false;
  if (cp == 0xad || cp == 0x1680 || cp == 0x3000 || cp == 0xfeff) return false;
  if (cp >= 0x2000 && cp <= 0x200f) return false;
  if (cp >= 0x2028 && cp <= 0x202f) return false;
  if (cp >= 0x205f && cp <= 0x206f) return false;
  if (cp >= 0xd800 && cp <= 0xdfff) return false;
  if (cp >= 0xe000 && cp <= 0xf8ff) return false;  // private use (Co)
  if (cp >= 0xfff9 && cp <= 0xfffb) return false;
  return true;
}

}  // namespace

void py_repr_str(std::string& out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = next_code_point(s, i);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x80 && cp >= 0x20 && cp != 0x7f) {
      out += static_cast<char>(cp);
    } else if (printable(cp)) {
      append_utf8(out, cp);
    } else if (cp < 0x100) {
      std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      out += buf;
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", cp);
      out += buf;
    }
  }
  out += quote;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout rules: positional for
  // exponents in [-4, 16), scientific otherwise, always with a '.' or 'e'.
  std::string sci = shortest_scientific(v);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else {
      size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_len);
        out += '.';
        out += digits.substr(int_len);
      }
    }
  } else {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char buf[16];
    std::snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += buf;
  }
  return out;
}

std::string bigint_decimal(std::string_view le) {
  if (le.empty()) return "0";
  std::vector<uint8_t> mag(le.begin(), le.end());
  bool neg = (mag.back() & 0x80) != 0;
  if (neg) {  // two's complement -> magnitude
    bool carry = true;
    for (auto& b : mag) {
      b = static_cast<uint8_t>(~b);
      if (carry) carry = (++b == 0);
    }
  }
  std::string digits;
  // Repeated division by 10 from the most significant byte.
  while (true) {
    bool zero = true;
    for (auto b : mag)
      if (b) zero = false;
    if (zero) break;
    unsigned rem = 0;
    for (size_t k = mag.size(); k-- > 0;) {
      unsigned cur = (rem << 8) | mag[k];
      mag[k] = static_cast<uint8_t>(cur / 10);
      rem = cur % 10;
    }
    digits += static_cast<char>('0' + rem);
  }
  if (digits.empty()) digits = "0";
  if (neg) digits += '-';
  return {digits.rbegin(), digits.rend()};
}

namespace {
void repr_into(std::string& out, const PyValue& v) {
  using K = PyValue::Kind;
  switch (v.kind) {
    case K::None:
      out += "None";
      break;
    case K::Bool:
      out += v.b ? "True" : "False";
      break;
    case K::Int:
      out += std::to_string(v.i);
      break;
    case K::BigInt:
      out += bigint_decimal(v.s);
      break;
    case K::Float:
      out += py_float_repr(v.f);
      break;
    case K::Str:
      py_repr_str(out, v.s);
      break;
    case K::Bytes: {
      out += 'b';
      bool has_single = v.s.str().find('\'') != std::string::npos;
      bool has_double = v.s.str().find('"') != std::string::npos;
      char quote = (has_single && !has_double) ? '"' : '\'';
      out += quote;
      char buf[8];
      for (unsigned char c : v.s) {
        if (c == quote || c == '\\') {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c == '\t') {
          out += "\\t";
        } else if (c == '\n') {
          out += "\\n";
        } else if (c == '\r') {
          out += "\\r";
        } else if (c < 0x20 || c >= 0x7f) {
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
      }
      out += quote;
      break;
    }
    case K::List:
    case K::Tuple: {
      out += v.kind == K::List ? '[' : '(';
      for (size_t k = 0; k < v.items.size(); ++k) {
        if (k) out += ", ";
        repr_into(out, v.items[k]);
      }
      if (v.kind == K::Tuple && v.items.size() == 1) out += ',';
      out += v.kind == K::List ? ']' : ')';
      break;
    }
    case K::Dict: {
      out += '{';
      for (size_t k = 0; k + 1 < v.items.size(); k += 2) {
        if (k) out += ", ";
        repr_into(out, v.items[k]);
        out += ": ";
        repr_into(out, v.items[k + 1]);
      }
      out += '}';
      break;
    }
  }
}
}  // namespace

std::string py_repr(const PyValue& v) {
  std::string out;
  repr_into(out, v);
  return out;
}

}  // namespace memsight
