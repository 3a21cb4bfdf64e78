// The flamegraph's colours (see flame_colors.h).
#include "report/flame_colors.h"

#include <cstdint>

namespace memsight::flame {
namespace {

// FNV-1a, then a splitmix64 finaliser so that every bit depends on every input byte.
uint64_t name_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// 21 bits of h starting at `shift`, as a number in [0, 1).
double unit(uint64_t h, int shift) {
  return static_cast<double>((h >> shift) & 0x1FFFFF) / 0x200000;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

Rgb frame_color(std::string_view name, bool root, const FrameLabelKinds& kinds) {
  if (root) return {185, 185, 195};
  if (!kinds.empty()) {
    auto kind = kinds.find(name);
    if (kind && *kind != FrameKind::User) {
      uint64_t h = name_hash(name);
      int j = static_cast<int>(20 * unit(h, 0));
      switch (*kind) {
        case FrameKind::Library:
          return {225 + j / 2, 205 + j / 2, 150 + j};
        case FrameKind::Internal:
          return {185 + j, 185 + j, 190 + j};
        default:
          return {140 + j, 175 + j, 225 + j / 2};
      }
    }
  }
  struct Special {
    std::string_view name;
    Rgb rgb;
  };
  static constexpr Special kSpecial[] = {
      {"active_allocated", {110, 190, 140}}, {"active_pending_free", {210, 205, 110}},
      {"inactive", {200, 200, 200}},         {"<gaps>", {228, 228, 228}},
      {"<non-python>", {195, 178, 225}},     {"only_before", {120, 200, 190}},
      {"only_after", {235, 160, 175}},
  };
  for (const Special& s : kSpecial) {
    if (name == s.name) return s.rgb;
  }
  uint64_t h = name_hash(name);
  if (starts_with(name, "stream_")) return {150, 165, 200};
  if (starts_with(name, "seg_")) {
    return {120 + static_cast<int>(40 * unit(h, 0)), 160 + static_cast<int>(40 * unit(h, 21)),
            210 + static_cast<int>(35 * unit(h, 42))};
  }
  size_t colon = name.find(':');
  double family =
      colon == std::string_view::npos ? unit(h, 0) : unit(name_hash(name.substr(0, colon)), 0);
  return {205 + static_cast<int>(50 * unit(h, 21)),
          70 + static_cast<int>(150 * (0.75 * family + 0.25 * unit(h, 42))),
          20 + static_cast<int>(55 * unit(h, 10))};
}

// A difference graph's frames (FlamegraphOptions::difference): reds under "grew", blues
// under "shrank"; the user's frames (and frames of no known kind) deep, the others pale.
Rgb difference_color(std::string_view name, bool grew, bool family_root,
                     const FrameLabelKinds& kinds) {
  if (family_root) return grew ? Rgb{215, 60, 60} : Rgb{60, 100, 215};
  const auto kind = kinds.find(name);
  const bool pale = kind && *kind != FrameKind::User;
  const int j = static_cast<int>(30 * unit(name_hash(name), 0));
  if (grew) return pale ? Rgb{240, 175 + j, 165 + j} : Rgb{225 + j / 3, 85 + j, 75 + j};
  return pale ? Rgb{170 + j, 190 + j, 240} : Rgb{85 + j, 125 + j, 225 + j / 3};
}

}  // namespace memsight::flame
