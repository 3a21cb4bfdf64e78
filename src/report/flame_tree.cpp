// Folded stacks read and merged into a tree (see flame_tree.h).
#include "report/flame_tree.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <string>

#include "memsight/error.h"
#include "util/lines.h"

namespace memsight::flame {
namespace {

[[noreturn]] void bad_line(size_t line_no, const std::string& what) {
  throw Error("folded input line " + std::to_string(line_no) + ": " + what);
}

// For error messages: the offending token, shortened and printable.
std::string quote_token(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 32; ++i) {
    unsigned char c = s[i];
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  if (s.size() > 32) out += "...";
  return out + "'";
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Frame-by-frame lexicographic order: byte order, except that ';' sorts before every other
// byte. Then all stacks that share a frame prefix are contiguous (plain byte order would put
// "a;b-x" between "a;b" and "a;b;c"), so the tree is built in one pass with no lookups.
bool frame_order_less(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  // Stacks share long prefixes; compare 8 bytes at a time to find the first difference.
  while (i + 8 <= n) {
    uint64_t x, y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) {
      if constexpr (std::endian::native == std::endian::little) {
        i += std::countr_zero(x ^ y) / 8;
      } else {
        i += std::countl_zero(x ^ y) / 8;
      }
      break;
    }
    i += 8;
  }
  while (i < n && a[i] == b[i]) ++i;
  if (i == n) return a.size() < b.size();
  unsigned char ca = a[i], cb = b[i];
  if (ca == ';') return true;
  if (cb == ';') return false;
  return ca < cb;
}

}  // namespace

std::vector<Sample> parse_folded(std::string_view text) {
  std::vector<Sample> out;
  size_t line_no = 0;
  for_each_line(text, [&](std::string_view line) {
    ++line_no;
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty()) return;
    size_t sep = line.find_last_of(" \t");
    if (sep == std::string_view::npos) bad_line(line_no, "expected 'stack count'");
    std::string_view count_text = line.substr(sep + 1);
    std::string_view stack = line.substr(0, sep);
    while (!stack.empty() && is_space(stack.back())) stack.remove_suffix(1);
    // torch's folded text has negative "<gaps>" lines where a block's stale
    // requested_size exceeds its size; flamegraph.pl ignores them, and so do we.
    if (count_text.size() > 1 && count_text[0] == '-' &&
        count_text.find_first_not_of("0123456789", 1) == std::string_view::npos)
      return;
    uint64_t count = 0;
    const char* end = count_text.data() + count_text.size();
    // from_chars takes no sign for unsigned types, so "-1" and "+1" are rejected here.
    auto [ptr, ec] = std::from_chars(count_text.data(), end, count);
    if (ec == std::errc::result_out_of_range) {
      bad_line(line_no, "count " + quote_token(count_text) + " does not fit in 64 bits");
    }
    if (ec != std::errc() || ptr != end) {
      bad_line(line_no, "expected 'stack count', got count " + quote_token(count_text) +
                            " (not a non-negative integer)");
    }
    if (count != 0) out.push_back({stack, count});
  });
  return out;
}

[[noreturn]] void total_overflow() { throw Error("folded input: total count exceeds 2^64-1"); }

std::vector<Node> build_tree(std::vector<Sample> samples) {
  std::sort(samples.begin(), samples.end(),
            [](const Sample& a, const Sample& b) { return frame_order_less(a.stack, b.stack); });
  std::vector<Node> nodes;
  nodes.push_back({"all", 0, 0, 0});
  std::vector<uint32_t> path = {0};      // open nodes, by depth
  std::vector<std::string_view> frames;  // frames of the current stack
  std::vector<std::string_view> prev;    // frames of the previous stack
  auto close_to = [&](size_t depth) {    // keep path[0..depth]
    while (path.size() > depth + 1) {
      nodes[path.back()].end = static_cast<uint32_t>(nodes.size());
      path.pop_back();
    }
  };
  for (size_t s = 0; s < samples.size();) {
    // Identical stacks are adjacent after the sort: merge them, summing counts.
    std::string_view stack = samples[s].stack;
    uint64_t count = 0;
    for (; s < samples.size() && samples[s].stack == stack; ++s) {
      if (count > UINT64_MAX - samples[s].count) total_overflow();
      count += samples[s].count;
    }
    if (nodes[0].total > UINT64_MAX - count) total_overflow();
    frames.clear();
    for (size_t b = 0; !stack.empty();) {
      size_t e = stack.find(';', b);
      if (e == std::string_view::npos) {
        frames.push_back(stack.substr(b));
        break;
      }
      frames.push_back(stack.substr(b, e - b));
      b = e + 1;
    }
    size_t common = 0;
    while (common < frames.size() && common < prev.size() && frames[common] == prev[common]) {
      ++common;
    }
    close_to(common);
    for (size_t d = common; d < frames.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({frames[d], 0, 0, static_cast<uint32_t>(d + 1)});
    }
    for (uint32_t id : path) nodes[id].total += count;
    std::swap(frames, prev);
  }
  close_to(0);
  nodes[0].end = static_cast<uint32_t>(nodes.size());
  return nodes;
}

}  // namespace memsight::flame
