#pragma once
// Folded stacks ("frame;frame;frame count" per line) read and merged into
// one tree of frames, as flamegraph.pl merges them: identical stacks sum,
// stacks sharing a prefix share its frames.
#include <cstdint>
#include <string_view>
#include <vector>

namespace memsight::flame {

struct Sample {
  std::string_view stack;
  uint64_t count;
};

// One "stack count" per line, split at the last space or tab. Trailing whitespace (and so
// CRLF) is tolerated; an empty stack (" 5") counts towards the root alone. Bad lines throw
// Error, naming the line.
std::vector<Sample> parse_folded(std::string_view text);

// Nodes in depth-first preorder: node i's subtree is [i, end); children are found by
// hopping from i + 1 to the next end.
struct Node {
  std::string_view name;
  uint64_t total;
  uint32_t end;
  uint32_t depth;
};

// The tree of the samples (merged), the root "all" first.
std::vector<Node> build_tree(std::vector<Sample> samples);

}  // namespace memsight::flame
