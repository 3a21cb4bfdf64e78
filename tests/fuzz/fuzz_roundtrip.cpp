// libFuzzer target, differential: whatever the reader accepts, the writer
// writes back as a pickle that the reader reads into the same snapshot, and
// writing that again gives the same bytes (read, write, read, write: the
// two writes are equal). Values the reader keeps as data (extra keys, odd
// types) must survive the round trip unchanged. The writer shares through
// the memo by what values say, not by how the model shares them, so the
// bytes settle at the second write (tests/fuzz/README.md, findings 7, 14
// and 15).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "memsight/error.h"
#include "memsight/pyvalue.h"
#include "memsight/reader.h"
#include "memsight/text_tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string once;
  memsight::Snapshot first;
  try {
    first = memsight::read_snapshot_bytes({reinterpret_cast<const char*>(data), size});
    once = memsight::pickle_snapshot(first);
  } catch (const memsight::Error&) {
    return 0;
  }
  // From here on, an error is a bug: the writer's output must read back.
  memsight::Snapshot second = memsight::read_snapshot_bytes(once);
  if (memsight::trace_text(second) != memsight::trace_text(first)) std::abort();
  if (memsight::segsum(second) != memsight::segsum(first)) std::abort();
  if (second.top_level.size() != first.top_level.size()) std::abort();
  for (size_t i = 0; i < first.top_level.size(); ++i)
    if (memsight::py_repr(second.top_level[i].second) !=
        memsight::py_repr(first.top_level[i].second))
      std::abort();
  if (memsight::pickle_snapshot(second) != once) std::abort();
  return 0;
}
