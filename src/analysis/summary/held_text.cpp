// Who holds the live memory at the dump, by holder: the largest few, from
// the snapshot's own live blocks (the holders were named at that moment).
#include "analysis/summary/held_text.h"

#include <algorithm>
#include <map>

#include "analysis/leaks/leak_holders.h"
#include "util/lines.h"
#include "util/text_format.h"

namespace memsight {

void held_text(std::string& out, const Snapshot& snap, const Holders& holders, int64_t device) {
  if (holders.empty()) return;
  std::map<uint32_t, std::pair<int64_t, int64_t>> by_holder;  // holder -> (blocks, bytes)
  for (const Segment& seg : snap.segments) {
    if (seg.device != device) continue;
    for (const Block& b : snap.segment_blocks(seg)) {
      if (b.state != BlockState::ActiveAllocated) continue;
      if (const HeldStorage* h = holders.in_block(device, b.address, b.size)) {
        auto& [n, bytes] = by_holder[h->holder];
        ++n;
        bytes += b.size;
      }
    }
  }
  if (by_holder.empty()) return;
  std::vector<std::pair<uint32_t, std::pair<int64_t, int64_t>>> rows(by_holder.begin(),
                                                                     by_holder.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  constexpr size_t kShown = 5;
  std::string line = "Held at the dump (named by memsight.torch): ";
  for (size_t i = 0; i < rows.size() && i < kShown; ++i)
    line += (i ? "; " : "") + holder_words(holders.holders[rows[i].first]) + " " +
            count_of(rows[i].second.first, "block") + ", " + format_bytes(rows[i].second.second);
  if (rows.size() > kShown) line += "; " + count_of(rows.size() - kShown, "more holder");
  out += wrap_words(line + ".", "  ");
}

}  // namespace memsight
