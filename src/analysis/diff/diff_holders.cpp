// The holders of two dumps side by side, matched by their path and module.
#include "analysis/diff/diff_holders.h"

#include <algorithm>
#include <map>

#include "analysis/leaks/leak_holders.h"
#include "util/text_format.h"

namespace memsight {

std::string held_change_text(const DiffMoment& before, const DiffMoment& after) {
  // Both sides must be dumps with holders: a moment inside a history has none,
  // and "0 -> all" against it would read as growth.
  if (before.held.empty() || after.held.empty()) return "";
  struct Row {
    Holder holder;
    int64_t bytes[2] = {0, 0}, blocks[2] = {0, 0};
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (int side = 0; side < 2; ++side)
    for (const HeldAmount& h : (side ? after : before).held) {
      Row& r = rows[{h.holder.path, h.holder.module}];
      r.holder = h.holder;
      r.bytes[side] = h.bytes;
      r.blocks[side] = h.blocks;
    }
  std::vector<Row> list;
  for (auto& [key, r] : rows) list.push_back(r);
  auto change = [](const Row& r) { return r.bytes[1] - r.bytes[0]; };
  std::stable_sort(list.begin(), list.end(), [&](const Row& x, const Row& y) {
    return std::abs(change(x)) > std::abs(change(y));
  });
  std::string out = "\n  by holder (named by memsight.torch at each dump), largest change first:\n";
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < list.size() && i < kShown; ++i) {
    const Row& r = list[i];
    int64_t blocks = r.blocks[1] - r.blocks[0];
    out += "    " + holder_words(r.holder) + ": " + format_bytes(r.bytes[0]) + " -> " +
           format_bytes(r.bytes[1]) + " (" + (change(r) < 0 ? "-" : "+") +
           format_bytes(std::abs(change(r))) + ", " + (blocks < 0 ? "-" : "+") +
           count_of(std::abs(blocks), "block") + ")\n";
  }
  if (list.size() > kShown) out += "    ...\n";
  return out;
}

}  // namespace memsight
