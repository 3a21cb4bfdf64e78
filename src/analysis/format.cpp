#include <cmath>
#include <cstdio>

#include "memsight/text_tools.h"

namespace memsight {

std::string format_size(double num) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
  char buf[64];
  for (const char* unit : kUnits) {
    if (std::fabs(num) < 1024.0) {
      std::snprintf(buf, sizeof buf, "%3.1f%sB", num, unit);
      return buf;
    }
    num /= 1024.0;
  }
  std::snprintf(buf, sizeof buf, "%.1fYiB", num);
  return buf;
}

std::string format_bytes(double num) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
  char buf[64];
  for (const char* unit : kUnits) {
    // The unit is chosen after rounding to one decimal: 1023.96 GiB is the
    // next unit's 1.0, where torch's rule prints "1024.0GiB".
    if (std::fabs(num) < 1023.95) {
      std::snprintf(buf, sizeof buf, "%3.1f%sB", num, unit);
      return buf;
    }
    num /= 1024.0;
  }
  std::snprintf(buf, sizeof buf, "%.1fYiB", num);
  return buf;
}

}  // namespace memsight
