// Who holds the live memory at the dump, by holder: the largest few, from
// the snapshot's own live blocks (the holders were named at that moment).
#include "analysis/summary/held_text.h"

#include "analysis/leaks/leak_holders.h"
#include "util/lines.h"
#include "util/text_format.h"

namespace memsight {

void held_text(std::string& out, const std::vector<HeldAmount>& rows) {
  if (rows.empty()) return;
  constexpr size_t kShown = 5;
  std::string line = "Held at the dump (named by memsight.torch): ";
  for (size_t i = 0; i < rows.size() && i < kShown; ++i)
    line += (i ? "; " : "") + holder_words(rows[i].holder) + " " +
            count_of(rows[i].blocks, "block") + ", " + format_bytes(rows[i].bytes);
  if (rows.size() > kShown) line += "; " + count_of(rows.size() - kShown, "more holder");
  out += wrap_words(line + ".", "  ");
}

}  // namespace memsight
