// libFuzzer target, differential: whatever the reader accepts, the writer
// writes back as a pickle that the reader reads into the same snapshot, and
// writing that again gives the same bytes (read, write, read, write: the
// two writes are equal). Values the reader keeps as data (extra keys, odd
// types) must survive the round trip unchanged.
// Known gap (tests/fuzz/README.md, finding 14): a list that a trace entry
// under an unknown key holds as its frames and a dict among its frames
// holds as 'blocks' is written shared by the first write and read back
// with other sharing (open/entry-frames-list-also-a-blocks-list.pickle).
// Such an input must reach the same bytes one round later, with the same
// values; every seed must be stable at the second (writer_fixpoint_test).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

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
  // The writer should be byte-stable on a second round. Known gap (issue 34;
  // tests/fuzz/open, findings 14-16): values that a kept top-level value
  // shares with segments or the trace through the memo are written shared a
  // little differently each round, the same values every time, until the
  // sharing settles (finding 15 at the fifth write, 16 at the ninth: a
  // round for each level of sharing). Required here: every round reads the
  // same trace and segments, and the bytes settle within 64 rounds (never
  // growing for ever).
  std::string prev = memsight::pickle_snapshot(second);
  if (prev == once) return 0;
  for (int round = 3; round <= 64; ++round) {
    const memsight::Snapshot again = memsight::read_snapshot_bytes(prev);
    if (memsight::trace_text(again) != memsight::trace_text(first) ||
        memsight::segsum(again) != memsight::segsum(first))
      std::abort();
    std::string next = memsight::pickle_snapshot(again);
    if (next == prev) return 0;
    prev = std::move(next);
  }
  std::abort();
}
