#include "util/version.h"

#ifndef MEMSIGHT_VERSION
#error "MEMSIGHT_VERSION is the VERSION file's text, defined for this file by CMakeLists.txt"
#endif

namespace memsight {

std::string_view version() { return MEMSIGHT_VERSION; }

std::string_view named_version() { return "memsight " MEMSIGHT_VERSION; }

}  // namespace memsight
