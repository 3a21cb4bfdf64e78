#include "cli/cli.h"
#include "memsight/summary.h"

namespace memsight::cli {

int cmd_summary(const std::vector<std::string>& argv) {
  Args a = parse_args(argv, {{"--json", "", false}, {"--output", "-o", true}});
  expect_positional(a, 1, "memsight summary SNAPSHOT [--json] [-o FILE]");
  Snapshot snap = load(a.positional[0]);
  Summary s = summarize(snap);
  write_output(a.get("--output", "-"),
               a.has("--json") ? summary_json(snap, s) : summary_text(snap, s));
  return 0;
}

}  // namespace memsight::cli
