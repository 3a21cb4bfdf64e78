#include <cmath>
#include <cstdio>

#include "memsight/text_tools.h"

namespace memsight {
namespace {

// "%3.1f" and a binary unit, the next unit from `next_at` up.
std::string size_text(double num, double next_at) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
  char buf[64];
  for (const char* unit : kUnits) {
    if (std::fabs(num) < next_at) {
      std::snprintf(buf, sizeof buf, "%3.1f%sB", num, unit);
      return buf;
    }
    num /= 1024.0;
  }
  std::snprintf(buf, sizeof buf, "%.1fYiB", num);
  return buf;
}

}  // namespace

std::string format_size(double num) { return size_text(num, 1024.0); }

// The unit is chosen after rounding to one decimal: from 1023.95 up a value
// prints as the next unit's 1.0, where torch's rule prints "1024.0GiB".
std::string format_bytes(double num) { return size_text(num, 1023.95); }

}  // namespace memsight
