#pragma once
// Renders folded stacks ("a;b;c 123" per line) as a self-contained,
// interactive SVG flamegraph: click to zoom, search, hover details,
// deterministic colours. No external script, no network.

#include <string>
#include <string_view>

#include "memsight/frames.h"
#include "memsight/text_tools.h"

namespace memsight {

struct FlamegraphOptions {
  std::string title = "Flame Graph";
  std::string count_name = "bytes";  // unit shown in hover text
  int width = 1200;
  bool bytes = true;  // format counts as sizes (KiB, MiB, ...) in labels
  // Frame label ("file.py:12:name") -> kind: user code keeps the warm
  // colours, library Python is muted, allocator and interpreter plumbing
  // grey, other native code blue. Unlisted: warm.
  FrameLabelKinds frame_kinds;
  // A difference graph: the root's children are "grew" and "shrank", and
  // every frame under them is coloured by which (reds, blues), its kind
  // setting the shade.
  bool difference = false;
};

// Throws memsight::Error on malformed input lines.
std::string render_flamegraph_svg(std::string_view folded, const FlamegraphOptions& opts = {});
// The same from stacks given as data (no text is parsed, so a frame name may
// hold any byte but ';', which separates frames as in folded text); lines
// with a count of 0 or less are left out, as flamegraph.pl leaves them.
std::string render_flamegraph_svg(const Folded& folded, const FlamegraphOptions& opts = {});

}  // namespace memsight
