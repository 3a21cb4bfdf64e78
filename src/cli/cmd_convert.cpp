#include <cstdio>

#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/reader.h"

namespace memsight::cli {

int cmd_convert(const Args& a) {
  expect_positional(a, 1);
  if (!a.has("--output")) throw Error("missing -o OUT");
  const std::string out = a.get("--output");
  output_format("convert", out, {"pickle"}, "pickle", {.compressible = true});
  Snapshot snap = load(a.positional[0]);
  write_snapshot_file(snap, out);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace memsight::cli
