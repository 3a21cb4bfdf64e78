// stats, trace, segments, memory, compare: torch's _memory_viz commands.
#include <cstdio>
#include <iostream>

#include "cli/cli.h"
#include "memsight/error.h"
#include "memsight/flamegraph.h"
#include "memsight/text_tools.h"

namespace memsight::cli {
namespace {

// segments/memory/compare: SVG flamegraph by default (as torch), folded text
// for .folded/.txt names or "-". Checked before the inputs are read.
std::string flamegraph_format(const std::string& command, const std::string& out) {
  return out == "-" ? "folded" : output_format(command, out, {"svg", "folded", "text"}, "svg");
}

// The frames' kinds colour the SVG only, so they are found only for it (a
// label per frame).
template <class Kinds>
void write_flamegraph(const Folded& folded, const std::string& out, const std::string& format,
                      const std::string& title, Kinds kinds) {
  if (format != "svg") {
    write_output(out, folded.text);
  } else {
    FlamegraphOptions opts;
    opts.title = title;
    kinds(opts.frame_kinds);
    write_output(out, render_flamegraph_svg(folded, opts));
  }
  if (out != "-") std::fprintf(stderr, "wrote %s\n", out.c_str());
}

}  // namespace

int cmd_text(const Args& a) {
  const std::string& name = a.command;
  bool graph = name == "segments" || name == "memory";
  expect_positional(a, 1);
  const std::string out = a.get("--output", graph ? "output.svg" : "-");
  const std::string format =
      graph ? flamegraph_format(name, out) : output_format(name, out, {"text"}, "text");
  // Only `trace` looks at the trace; the others read segments and blocks.
  Snapshot snap =
      load(a.positional[0], name == "trace" ? ReadScope::Everything : ReadScope::SegmentsOnly);
  if (name == "stats" || name == "trace") {
    std::string text = name == "stats" ? segsum(snap) : trace_text(snap);
    text += '\n';  // torch's CLI print()s the returned string
    write_output(out, text);
    return 0;
  }
  Folded folded = name == "segments" ? folded_segments_lines(snap) : folded_memory_lines(snap);
  write_flamegraph(folded, out, format,
                   name == "segments" ? "Segments (reserved memory by segment and stack)"
                                      : "Memory (allocator blocks by stack)",
                   [&](FrameLabelKinds& k) { k.add(snap); });
  return 0;
}

int cmd_compare(const Args& a) {
  expect_positional(a, 2);
  const std::string out = a.get("--output", "output.svg");
  const std::string format = flamegraph_format("compare", out);
  Snapshot before = load(a.positional[0], ReadScope::SegmentsOnly);
  Snapshot after = load(a.positional[1], ReadScope::SegmentsOnly);
  Comparison c = compare(before, after);
  // The set lines go to stdout unless the folded text itself does.
  if (out == "-")
    std::fputs(c.stdout_text.c_str(), stderr);
  else
    write_stdout(c.stdout_text);
  write_flamegraph(Folded{c.folded, c.folded_lines}, out, format, "Segments only in one snapshot",
                   [&](FrameLabelKinds& k) {
                     k.add(after);
                     k.add(before);
                   });
  return 0;
}

}  // namespace memsight::cli
