// memsight profile: torch.profiler traces and memory timelines.
#include <cstdio>

#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/profile.h"

namespace memsight::cli {

int cmd_profile(const Args& a) {
  expect_positional(a, 1);
  const std::string& input = a.positional[0];
  std::string name = input == "-" ? "<stdin>" : input.substr(input.find_last_of('/') + 1);
  std::string out = a.get("--output", "-");
  if (a.has("--timeline")) {
    if (named_format(out) != "html") throw Error("--timeline writes a page: give -o NAME.html");
    output_format("profile", out, {"html"}, "html");
    MemoryTimeline t = read_memory_timeline(input);
    write_output(out, timeline_html(t, name + " - memory timeline"));
    std::fprintf(stderr, "%swrote %s\n", t.notes.text("note: ").c_str(), out.c_str());
    return 0;
  }
  const bool json = a.has("--json");
  const std::string format =
      output_format("profile", out, {"text", "json", "html"}, json ? "json" : "text",
                    {.flag = json ? "--json" : nullptr});
  ProfileReport r =
      analyze_profile(read_profile_trace(input), UserCode::parse(a.get("--user-code")));
  if (format == "html") {
    write_output(out, profile_html(r, name + " - memsight profile"));
    std::fprintf(stderr, "wrote %s\n", out.c_str());
  } else {
    write_output(out, format == "json" ? profile_json(r) : profile_text(r));
  }
  return 0;
}

}  // namespace memsight::cli
