#include "util/text_format.h"

#include <cmath>
#include <cstdio>

namespace memsight {
namespace {

// "%.1f", or `fmt`, of v; a value that rounds to zero is "0.0", without
// a sign ("-0.0" or "+0.0" would claim a direction it does not show).
std::string one_decimal(double v, const char* fmt = "%.1f") {
  if (std::fabs(v) < 0.05) return "0.0";
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

std::string binary_size(double bytes, double next_at) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
  char buf[64];
  for (const char* unit : kUnits) {
    if (std::fabs(bytes) < next_at) {
      std::snprintf(buf, sizeof buf, "%3.1f%sB", bytes, unit);
      return buf;
    }
    bytes /= 1024.0;
  }
  std::snprintf(buf, sizeof buf, "%.1fYiB", bytes);
  return buf;
}

std::string format_bytes(double bytes) { return binary_size(bytes, 1023.95); }

std::string signed_bytes(int64_t delta) {
  if (delta == 0) return "0";
  // The magnitude as an unsigned value: -INT64_MIN does not fit an int64_t.
  uint64_t mag = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
  return (delta > 0 ? "+" : "-") + format_bytes(static_cast<double>(mag));
}

std::string percent(double share) { return one_decimal(100.0 * share) + "%"; }

std::string percent(double part, double whole) { return percent(whole > 0 ? part / whole : 0.0); }

std::string signed_percent(double change) { return one_decimal(100.0 * change, "%+.1f") + "%"; }

std::string percent_points(double change) {
  if (change == 0) return "0";
  return one_decimal(100.0 * change, "%+.1f") + " pt";
}

std::string count_text(int64_t n) {
  uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits = std::to_string(mag), out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string count_of(int64_t n, std::string_view singular, std::string_view plural) {
  std::string out = count_text(n) + ' ';
  if (n == 1) return out.append(singular);
  if (plural.empty()) return out.append(singular) + 's';
  return out.append(plural);
}

bool parse_size(std::string_view text, uint64_t& bytes) {
  size_t i = 0;
  uint64_t n = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (n > (UINT64_MAX - 9) / 10) return false;
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == 0) return false;
  const std::string_view unit = text.substr(i);
  const int shift = unit.empty() || unit == "B"                   ? 0
                    : unit == "K" || unit == "k" || unit == "KiB" ? 10
                    : unit == "M" || unit == "MiB"                ? 20
                    : unit == "G" || unit == "GiB"                ? 30
                    : unit == "T" || unit == "TiB"                ? 40
                                                                  : -1;
  if (shift < 0 || n == 0 || n > (UINT64_MAX >> shift)) return false;
  bytes = n << shift;
  return true;
}

}  // namespace memsight
