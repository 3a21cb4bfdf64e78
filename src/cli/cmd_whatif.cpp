#include "analysis/whatif/whatif.h"
#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/whatif.h"

namespace memsight::cli {

int cmd_whatif(const Args& a) {
  // --set may be given several times; its values join into one setting.
  std::string set;
  for (const std::string& value : a.all("--set")) {
    if (value.empty()) throw Error("option --set needs a value such as expandable_segments:True");
    set += (set.empty() ? "" : ",") + value;
  }
  expect_positional(a, 1);
  // The output's name chooses text or JSON as for every report (refused
  // before anything is read when it names what whatif does not write).
  const bool json = a.has("--json");
  const std::string out = a.get("--output", "-");
  const bool as_json = output_format("whatif", out, {"text", "json"}, json ? "json" : "text",
                                     {.flag = json ? "--json" : nullptr}) == "json";
  whatif::Options opts;
  opts.set = set;
  if (a.has("--device-memory"))
    opts.device_memory = parse_device_memory(a.get("--device-memory"), "option --device-memory");
  if (a.has("--memory-fraction"))
    opts.memory_fraction =
        parse_memory_fraction(a.get("--memory-fraction"), "option --memory-fraction");
  if (!set.empty()) {
    alloc::Settings probe;
    probe.apply(set);  // a bad setting fails before the snapshot is read
  }
  Snapshot snap = load(a.positional[0]);
  whatif::Report r = whatif::run(snap, opts);
  write_output(out, as_json ? whatif::json(r) : whatif::text(r));
  return 0;
}

}  // namespace memsight::cli
