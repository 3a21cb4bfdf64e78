#pragma once
// The fixture snapshots in tests/data (torch 2.11, with torch's outputs).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace memsight::test
