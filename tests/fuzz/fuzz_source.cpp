// libFuzzer target: the byte sources (gzip, zstd, xz; truncated, corrupt
// and concatenated streams) read to the end in reads of varying sizes.
// The first input byte picks the read sizes; the rest is the input. Reads
// must return no more than asked, the expansion limit must hold, and head()
// must be the first bytes read (what the input sniffing looks at).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "input/input_kind.h"
#include "input/source.h"
#include "memsight/error.h"
#include "memsight/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t step = 1 + (size_t{data[0]} << 4);
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<char> buf(step);
  uint64_t total = 0;
  try {
    auto src = memsight::memory_source(in);
    bool compressed = !src->compression().empty();
    const std::string head(src->head());
    (void)memsight::sniff_input(head);
    std::string first;  // the first head().size() bytes read
    for (;;) {
      size_t k = src->read(buf.data(), step);
      if (k > step) std::abort();
      if (k == 0) break;
      if (first.size() < memsight::ByteSource::kHeadBytes)
        first.append(buf.data(), std::min(k, memsight::ByteSource::kHeadBytes - first.size()));
      total += k;
      if (compressed &&
          total > memsight::kExpansionAllowance + memsight::kExpansionRatio * (in.size() + 1))
        std::abort();
      if (!compressed && total > in.size()) std::abort();
    }
    if (!compressed && total != in.size()) std::abort();
    if (first != head) std::abort();
  } catch (const memsight::Error&) {
  }
  return 0;
}
