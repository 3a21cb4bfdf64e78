// viewer: the standalone page that opens any snapshot by itself.
#include <cstdio>

#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/html.h"

namespace memsight::cli {

int cmd_viewer(const Args& a) {
  expect_positional(a, 0);
  std::string out = a.get("--output", "memsight-viewer.html");
  output_format("viewer", out, {"html"}, "html");
  write_output(out, render_standalone_viewer());
  if (out != "-") std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace memsight::cli
