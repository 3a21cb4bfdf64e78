#pragma once
// The fixture snapshots in tests/data (torch 2.11, with torch's outputs).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "input/source.h"
#include "memsight/error.h"

namespace memsight::test {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Names of the fixtures (tests/data/NAME.pickle), sorted.
inline std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (auto& e : std::filesystem::directory_iterator(MEMSIGHT_TEST_DATA))
    if (e.path().extension() == ".pickle") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Compressed bytes (gzip, zstd, xz), decompressed. Throws Error.
inline std::string decompress(const std::string& packed) {
  std::string bytes;
  auto src = memory_source(packed);
  char buf[1 << 16];
  while (size_t n = src->read(buf, sizeof buf)) bytes.append(buf, n);
  return bytes;
}

// The 856k-entry training run from ../shared, decompressed; empty (with
// `why` set) when it is not beside the checkout or liblzma is not built in.
inline std::string large_fixture(std::string& why) {
  std::filesystem::path xz = MEMSIGHT_LARGE_FIXTURE;
  if (!std::filesystem::exists(xz)) {
    why = xz.string() + " is not here";
    return {};
  }
  try {
    return decompress(slurp(xz));
  } catch (const Error& e) {
    why = e.what();  // built without liblzma
    return {};
  }
}

}  // namespace memsight::test
