#include "util/float_chars.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
#define MEMSIGHT_FLOAT_CHARCONV 1
#endif

namespace memsight {

bool parse_double_fallback(std::string_view text, double& out) {
  // strtod reads more than from_chars does; what it reads beyond is refused.
  if (text.empty() || text[0] == '+' || text.find_first_of(" \t\n\v\f\rxX") != text.npos)
    return false;
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno == ERANGE || end != s.c_str() + s.size()) return false;
  out = v;
  return true;
}

namespace {

// "d.ddde+XX" one unit up in its last digit ("9.99e+01" -> "1.00e+02").
std::string next_up(const std::string& sci) {
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::atoi(sci.c_str() + e + 1);
  size_t i = mant.size();
  while (i-- > 0) {
    if (mant[i] == '.') continue;
    if (mant[i] != '9') {
      ++mant[i];
      break;
    }
    mant[i] = '0';
  }
  if (i == static_cast<size_t>(-1)) {  // 9.99 -> 10.00: 1.00, one exponent up
    mant[0] = '1';
    ++exp;
  }
  char tail[16];
  std::snprintf(tail, sizeof tail, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return mant + tail;
}

}  // namespace

std::string shortest_scientific_fallback(double v) {
  if (!std::isfinite(v)) return fixed_text_fallback(v, 0);  // inf, nan as printf writes them
  // The first precision whose correctly rounded digits read back as v. At a
  // power of two the doubles below are twice as close as those above, so
  // the next digits up may read back where the nearest do not.
  const double a = std::fabs(v);
  int binade = 0;
  const bool power_of_two = std::frexp(a, &binade) == 0.5;
  const std::string sign = std::signbit(v) ? "-" : "";
  char buf[64];
  for (int prec = 0; prec < 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, a);
    const double back = std::strtod(buf, nullptr);
    if (back == a) return sign + buf;
    if (power_of_two && back < a) {
      std::string up = next_up(buf);
      if (std::strtod(up.c_str(), nullptr) == a) return sign + up;
    }
  }
  std::snprintf(buf, sizeof buf, "%.16e", a);
  return sign + buf;
}

std::string shortest_text_fallback(double v) {
  std::string sci = shortest_scientific_fallback(v);
  const size_t e = sci.find('e');
  if (e == std::string::npos) return sci;  // inf, nan
  // The same digits laid out in fixed notation.
  const bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string fixed = neg ? "-" : "";
  if (exp < 0) {
    fixed += "0.";
    fixed.append(static_cast<size_t>(-exp - 1), '0');
    fixed += digits;
  } else if (digits.size() <= static_cast<size_t>(exp) + 1) {
    // A whole number: of the representations this long, the exact one.
    fixed = fixed_text_fallback(v, 0);
  } else {
    fixed.append(digits, 0, static_cast<size_t>(exp) + 1);
    fixed += '.';
    fixed.append(digits, static_cast<size_t>(exp) + 1);
  }
  return fixed.size() <= sci.size() ? fixed : sci;
}

std::string fixed_text_fallback(double v, int prec) {
  const int n = std::snprintf(nullptr, 0, "%.*f", prec, v);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), "%.*f", prec, v);
  out.resize(static_cast<size_t>(n));
  return out;
}

#ifdef MEMSIGHT_FLOAT_CHARCONV
bool parse_double(std::string_view text, double& out) {
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size();
}

std::string shortest_scientific(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  return std::string(buf, r.ptr);
}

std::string shortest_text(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string fixed_text(double v, int prec) {
  char buf[128];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, prec);
  if (r.ec != std::errc()) return fixed_text_fallback(v, prec);  // longer than the buffer
  return std::string(buf, r.ptr);
}
#else
bool parse_double(std::string_view text, double& out) { return parse_double_fallback(text, out); }
std::string shortest_scientific(double v) { return shortest_scientific_fallback(v); }
std::string shortest_text(double v) { return shortest_text_fallback(v); }
std::string fixed_text(double v, int prec) { return fixed_text_fallback(v, prec); }
#endif

}  // namespace memsight
