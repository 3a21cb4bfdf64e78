#include "memsight/text_tools.h"
#include "util/text_format.h"

namespace memsight {

// torch's _format_size: the next unit from 1024 up, so 1023.96 GiB prints
// "1024.0GiB" where memsight's format_bytes (util/text_format.h) prints
// "1.0TiB".
std::string format_size(double num) { return binary_size(num, 1024.0); }

}  // namespace memsight
