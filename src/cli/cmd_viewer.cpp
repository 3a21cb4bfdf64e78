// viewer: the standalone page that opens any snapshot by itself.
#include <cstdio>

#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/html.h"

namespace memsight::cli {

int cmd_viewer(const std::vector<std::string>& argv) {
  Args a = parse_args(argv, {{"--output", "-o", true}});
  expect_positional(a, 0, "memsight viewer [-o FILE]");
  std::string out = a.get("--output", "memsight-viewer.html");
  output_format("viewer", out, {"html"}, "html");
  write_output(out, render_standalone_viewer());
  if (out != "-") std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace memsight::cli
