// memsight leaks: memory that grows from iteration to iteration.
#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/leaks.h"

namespace memsight::cli {

int cmd_leaks(const Args& a) {
  expect_positional(a, 1);
  const bool json = a.has("--json");
  const std::string out = a.get("--output", "-");
  const bool as_json = output_format("leaks", out, {"text", "json"}, json ? "json" : "text",
                                     {.flag = json ? "--json" : nullptr}) == "json";
  Snapshot snap = load(a.positional[0]);
  if (snap.legacy_segment_list)
    throw Error(a.positional[0] +
                ": a list of segments without a trace (torch.cuda.memory_snapshot()); finding "
                "leaks needs the allocation history (torch.cuda.memory._record_memory_history)");
  Leaks leaks = find_leaks(snap, UserCode::parse(a.get("--user-code")));
  write_output(out, as_json ? leaks_json(snap, leaks) : leaks_text(snap, leaks));
  return 0;
}

}  // namespace memsight::cli
