// libFuzzer target: any bytes through the snapshot reader and every text
// analysis. A memsight::Error is the expected outcome for bad input;
// anything else (a crash, a sanitizer report, another exception) is a bug.
// The segments-only read must agree with the full read: the same reports
// when the full read succeeds, the same error when both fail.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "memsight/reader.h"
#include "memsight/summary.h"
#include "memsight/text_tools.h"

namespace {

std::optional<memsight::Snapshot> read(std::string_view bytes, memsight::ReadScope scope,
                                       std::string& error) {
  try {
    return memsight::read_snapshot_bytes(bytes, scope);
  } catch (const memsight::Error& e) {
    error = e.what();
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string full_error, part_error;
  auto full = read(bytes, memsight::ReadScope::Everything, full_error);
  auto part = read(bytes, memsight::ReadScope::SegmentsOnly, part_error);
  if (full && !part) std::abort();  // segments-only refused what a full read accepts
  if (!full && !part && full_error != part_error) std::abort();
  if (!full && part && !part->trace_skipped) std::abort();
  if (full && memsight::segsum(*part) != memsight::segsum(*full)) std::abort();
  if (full && memsight::folded_memory(*part) != memsight::folded_memory(*full)) std::abort();
  if (!full) return 0;
  try {
    (void)memsight::trace_text(*full);
    (void)memsight::folded_segments(*full);
    (void)memsight::summary_json(*full, memsight::summarize(*full));
    (void)memsight::read_snapshot_bytes(memsight::pickle_snapshot(*full));
  } catch (const memsight::Error&) {
  }
  return 0;
}
