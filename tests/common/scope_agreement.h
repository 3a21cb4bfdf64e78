#pragma once
// The property the segments-only read must have on every input, shared by
// the unit tests and the fuzzer: the same reports as a full read when that
// succeeds, the same error when both fail, and success over a failed full
// read only when the trace was skipped (its entries were never looked at).
#include <optional>
#include <string>
#include <string_view>

#include "memsight/reader.h"
#include "memsight/text_tools.h"

namespace memsight::test {

struct ScopeReads {
  std::optional<Snapshot> full, part;
  std::string full_error, part_error;
};

inline ScopeReads read_both_scopes(std::string_view bytes) {
  ScopeReads r;
  try {
    r.full.emplace(read_snapshot_bytes(bytes, ReadScope::Everything));
  } catch (const Error& e) {
    r.full_error = e.what();
  }
  try {
    r.part.emplace(read_snapshot_bytes(bytes, ReadScope::SegmentsOnly));
  } catch (const Error& e) {
    r.part_error = e.what();
  }
  return r;
}

// "" when the two reads agree, else what differs.
inline std::string scope_disagreement(const ScopeReads& r) {
  if (r.full) {
    if (!r.part) return "segments-only read failed: " + r.part_error;
    if (segsum(*r.part) != segsum(*r.full)) return "stats differ";
    if (folded_memory(*r.part) != folded_memory(*r.full)) return "memory differs";
    if (folded_segments(*r.part) != folded_segments(*r.full)) return "segments differ";
    return "";
  }
  if (r.part) {
    return r.part->trace_skipped
               ? ""
               : "segments-only read accepted what the full read refused (" + r.full_error + ")";
  }
  if (r.part_error != r.full_error)
    return "different errors: '" + r.part_error + "' against '" + r.full_error + "'";
  return "";
}

}  // namespace memsight::test
