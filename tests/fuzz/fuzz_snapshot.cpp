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

#include "../common/scope_agreement.h"
#include "memsight/diff.h"
#include "memsight/leaks.h"
#include "memsight/ranks.h"
#include "memsight/reader.h"
#include "memsight/summary.h"
#include "memsight/text_tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reads = memsight::test::read_both_scopes({reinterpret_cast<const char*>(data), size});
  if (!memsight::test::scope_disagreement(reads).empty()) std::abort();
  if (!reads.full) return 0;
  const memsight::Snapshot& full = *reads.full;
  try {
    (void)memsight::trace_text(full);
    // Alike devices summarised once must read as when each is summarised.
    memsight::SummaryOptions apart;
    apart.group_alike = false;
    std::string every = memsight::summary_json(full, memsight::summarize(full, apart));
    if (every != memsight::summary_json(full, memsight::summarize(full))) std::abort();
    (void)memsight::leaks_json(full, memsight::find_leaks(full));
    const size_t device = memsight::default_device(full).first;
    auto moments = memsight::measure_moments(full, "fuzz", device, {"-1", "peak", "snapshot"});
    (void)memsight::diff_json(memsight::diff_moments(moments[0], moments[2]));
    const memsight::SnapshotDiff change = memsight::diff_moments(moments[1], moments[2]);
    (void)memsight::diff_folded(change);
    (void)memsight::diff_svg(change);
    (void)memsight::read_snapshot_bytes(memsight::pickle_snapshot(full));
  } catch (const memsight::Error&) {
  }
  try {
    // A rank's declared world size is range-checked and its missing ranks
    // are ranges: a few bytes declaring 10^9 ranks cost nothing.
    memsight::RanksReport rep =
        memsight::merge_ranks({memsight::summarize_rank(full, "fuzz_rank0.pickle")});
    (void)memsight::ranks_text(rep);
    if (memsight::ranks_json(rep).size() > (size_t{64} << 20)) std::abort();
  } catch (const memsight::Error&) {
  }
  return 0;
}
