#pragma once
// memsight's release, as the CLI (--version) and the pages ("generator")
// print it. Its one source is the VERSION file at the root of the sources:
// CMake reads it and hands it to version.cpp alone, so a new release
// rebuilds one file.

#include <string_view>

namespace memsight {

// "0.1.0".
std::string_view version();
// "memsight 0.1.0": the program with its release.
std::string_view named_version();

}  // namespace memsight
