#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/summary.h"

namespace memsight::cli {

int cmd_summary(const Args& a) {
  expect_positional(a, 1);
  std::string frames = a.get("--frames", "user");
  if (frames != "user" && frames != "all")
    throw Error("--frames takes 'user' (the default) or 'all', not '" + frames + "'");
  const bool json = a.has("--json");
  const std::string out = a.get("--output", "-");
  const bool as_json = output_format("summary", out, {"text", "json"}, json ? "json" : "text",
                                     {.flag = json ? "--json" : nullptr}) == "json";
  SummaryOptions opts;
  opts.user_code = UserCode::parse(a.get("--user-code"));
  Snapshot snap = load(a.positional[0]);
  Summary s = summarize(snap, opts);
  write_output(out, as_json ? summary_json(snap, s) : summary_text(snap, s, frames == "all"));
  return 0;
}

}  // namespace memsight::cli
