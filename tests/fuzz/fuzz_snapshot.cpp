// libFuzzer target: any bytes through the snapshot reader and every text
// analysis. A memsight::Error is the expected outcome for bad input;
// anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstdint>
#include <string_view>

#include "memsight/reader.h"
#include "memsight/summary.h"
#include "memsight/text_tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    memsight::Snapshot snap =
        memsight::read_snapshot_bytes({reinterpret_cast<const char*>(data), size});
    (void)memsight::segsum(snap);
    (void)memsight::trace_text(snap);
    (void)memsight::folded_segments(snap);
    (void)memsight::summary_json(snap, memsight::summarize(snap));
    (void)memsight::read_snapshot_bytes(memsight::pickle_snapshot(snap));
  } catch (const memsight::Error&) {
  }
  return 0;
}
