#include "analysis/whatif/whatif.h"
#include "cli/cli.h"
#include "memsight/error.h"

namespace memsight::cli {

int cmd_whatif(const Args& a) {
  // --set may be given several times; its values join into one setting.
  std::string set;
  for (const std::string& value : a.all("--set")) {
    if (value.empty()) throw Error("option --set needs a value such as expandable_segments:True");
    set += (set.empty() ? "" : ",") + value;
  }
  expect_positional(a, 1);
  whatif::Options opts;
  opts.set = set;
  if (a.has("--device-memory"))
    opts.device_memory =
        static_cast<int64_t>(parse_size("--device-memory", a.get("--device-memory")));
  if (a.has("--memory-fraction")) {
    alloc::Settings probe;
    probe.apply("per_process_memory_fraction:" + a.get("--memory-fraction"));
    opts.memory_fraction = probe.memory_fraction;
  }
  if (!set.empty()) {
    alloc::Settings probe;
    probe.apply(set);  // a bad setting fails before the snapshot is read
  }
  Snapshot snap = load(a.positional[0]);
  whatif::Report r = whatif::run(snap, opts);
  write_output(a.get("--output", "-"), a.has("--json") ? whatif::json(r) : whatif::text(r));
  return 0;
}

}  // namespace memsight::cli
