// Text written into the flamegraph SVG (see flame_text.h).
#include "report/flame_text.h"

#include <charconv>
#include <cmath>

#include "util/float_chars.h"
#include "util/text_format.h"

namespace memsight::flame {

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_fixed(std::string& out, double v, int prec) { out += fixed_text(v, prec); }

std::string with_commas(uint64_t v) {
  std::string digits;
  append_uint(digits, v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// torch.cuda._memory_viz._format_size: the unit changes at 1024.
std::string torch_format_size(double num) { return binary_size(num, 1024.0); }

std::string clean_utf8(std::string_view s, size_t* cps) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t') {
        out += kReplacement;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    uint32_t cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0Fu : c & 0x1Fu;
    bool ok = len != 0 && c <= 0xF4 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      unsigned char cc = s[i + k];
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Reject overlong forms, surrogates, code points past U+10FFFF and XML's U+FFFE/U+FFFF.
    ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
         !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE && cp != 0xFFFF;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  if (cps) *cps = n;
  return out;
}

}  // namespace memsight::flame
