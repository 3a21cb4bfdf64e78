// view, trace-plot, segment-plot: the self-contained HTML report.
#include <sys/stat.h>

#include <cstdio>

#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/html.h"

namespace memsight::cli {
namespace {

// "run/oom.pickle.gz" -> "oom.html" in the current directory.
std::string default_output(const std::string& input) {
  std::string base = input == "-" ? "snapshot" : input.substr(input.find_last_of('/') + 1);
  for (const char* ext : {".gz", ".zst", ".zstd", ".xz", ".pickle", ".pkl"})
    if (ends_with(base, ext)) base.resize(base.size() - std::char_traits<char>::length(ext));
  return (base.empty() ? "snapshot" : base) + ".html";
}

}  // namespace

int cmd_view(const Args& a) {
  const std::string& name = a.command;
  expect_positional(a, 1);
  HtmlOptions opts;
  opts.view = name == "trace-plot" ? "timeline" : name == "segment-plot" ? "state" : "overview";
  if (a.has("--view")) opts.view = a.get("--view");
  if (!is_html_view(opts.view))
    throw Error("unknown view '" + opts.view +
                "' (expected overview, timeline, segments-timeline, state, pools, flamegraph, "
                "settings or leaks)");
  if (a.has("--device")) {
    const std::string& d = a.get("--device");
    size_t used = 0;
    try {
      opts.device = std::stoi(d, &used);
    } catch (const std::exception&) {
    }
    if (d.empty() || used != d.size() || opts.device < 0)
      throw Error("--device needs a device number (0, 1, ...), not '" + d + "'");
  }
  const std::string& input = a.positional[0];
  const std::string out = a.get("--output", default_output(input));
  output_format(name, out, {"html"}, "html");
  Snapshot snap = load(input);
  opts.source_name = input == "-" ? "<stdin>" : input.substr(input.find_last_of('/') + 1);
  opts.title = opts.source_name + " - memsight";
  struct stat st {};
  if (input != "-" && ::stat(input.c_str(), &st) == 0)
    opts.source_bytes = static_cast<uint64_t>(st.st_size);
  opts.user_code = UserCode::parse(a.get("--user-code"));
  write_output(out, render_html(snap, opts));
  if (out != "-") std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace memsight::cli
