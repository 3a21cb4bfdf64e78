// ranks: many ranks' snapshots, one report (text, JSON or a page with a
// page of its own for the ranks worth opening).
#include <cstdint>
#include <cstdio>

#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/ranks.h"
#include "util/text_format.h"

namespace memsight::cli {
int cmd_ranks(const Args& a) {
  expect_positional(a, 1, SIZE_MAX);
  const bool json = a.has("--json");
  const std::string out = a.get("--output", "-");
  const std::string format =
      output_format("ranks", out, {"text", "json", "html"}, json ? "json" : "text",
                    {.flag = json ? "--json" : nullptr});
  std::string pages = a.get("--pages", "notable");
  if (pages != "notable" && pages != "all" && pages != "none")
    throw Error("--pages takes notable (the default), all or none, not '" + pages + "'");
  if (a.has("--pages") && format != "html")
    throw Error("--pages writes rank pages beside a page: name one with -o NAME.html");
  RanksOptions opts;
  opts.user_code = UserCode::parse(a.get("--user-code"));
  opts.allow_absolute = a.has("--allow-absolute");
  if (a.has("--jobs")) {
    const std::string j = a.get("--jobs");
    if (j.empty() || j.size() > 3 || j.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(j) < 1 || std::stoi(j) > 256)
      throw Error("--jobs takes a number of files to read at once, 1 to 256, not '" + j + "'");
    opts.jobs = static_cast<unsigned>(std::stoi(j));
  }
  for (const std::string& p : a.positional)
    if (p == "-" && a.positional.size() > 1)
      throw Error("standard input (-) can only be the one input");
  RanksReport rep = read_ranks(a.positional, opts);
  if (format == "text") {
    write_output(out, ranks_text(rep));
  } else if (format == "json") {
    write_output(out, ranks_json(rep));
  } else {
    if (a.positional.size() == 1 && a.positional[0] == "-") pages = "none";
    size_t n = write_ranks_page(rep, out, pages, opts);
    std::fprintf(stderr, "wrote %s%s\n", out.c_str(),
                 n ? (" and " + count_of(static_cast<int64_t>(n), "rank page") + " in " +
                      rank_pages_folder(out) + "/")
                         .c_str()
                   : "");
  }
  return 0;
}

}  // namespace memsight::cli
