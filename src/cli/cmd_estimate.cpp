#include <cstdio>

#include "allocator/alloc_rules.h"
#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/estimate.h"
#include "memsight/reader.h"
#include "memsight/whatif.h"

namespace memsight::cli {

int cmd_estimate(const Args& a) {
  // --set may be given several times; its values join into one setting.
  std::string set;
  for (const std::string& value : a.all("--set")) {
    if (value.empty()) throw Error("option --set needs a value such as expandable_segments:True");
    set += (set.empty() ? "" : ",") + value;
  }
  expect_positional(a, 1);
  if (!a.has("--output"))
    throw Error("missing -o OUT.pickle: where to write the completed snapshot");
  const std::string out = a.get("--output");
  output_format("estimate", out, {"pickle"}, "pickle", {.compressible = true});
  EstimateRequest req;
  req.set = set;
  if (a.has("--device-memory"))
    req.device_memory = parse_device_memory(a.get("--device-memory"), "option --device-memory");
  if (a.has("--memory-fraction"))
    req.memory_fraction =
        parse_memory_fraction(a.get("--memory-fraction"), "option --memory-fraction");
  if (!set.empty()) {
    alloc::Settings probe;
    probe.apply(set);  // a bad setting fails before the snapshot is read
  }
  Snapshot snap = load(a.positional[0]);
  Estimated e = complete_estimate(snap, req);
  write_snapshot_file(e.snapshot, out);
  write_output("-", a.has("--json") ? e.json : e.text);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace memsight::cli
