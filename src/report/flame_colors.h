#pragma once
// The flamegraph's colours, a function of the frame name only (never of
// position or input), so the same frame looks the same in every graph.
//
// Colours (deterministic: a function of the frame name only, never of position or input):
//   root "all"                        grey            rgb(185,185,195)
//   stream_*                          slate blue      rgb(150,165,200)
//   seg_*                             blues, jittered by a hash so neighbouring segments differ
//   active_allocated                  green           rgb(110,190,140)   live blocks
//   active_pending_free               khaki           rgb(210,205,110)   freed, stream still busy
//   inactive                          light grey      rgb(200,200,200)   cached, free
//   <gaps>                            lighter grey    rgb(228,228,228)   unaccounted in a segment
//   <non-python>                      lavender        rgb(195,178,225)   block without Python stack
//   only_before / only_after          sea green / rose (memsight compare)
//   difference graphs (FlamegraphOptions::difference, memsight diff): "grew" and everything
//     under it red, "shrank" blue; the user's frames deep, library and native ones pale
//   code frames with a kind (FlamegraphOptions::frame_kinds, the frame rule of frames.h):
//     library Python tan, allocator/interpreter plumbing grey, other native code blue;
//     user code as below
//   anything else (code frames)       warm palette (red..orange..yellow): the hue comes from a
//                                     hash of the part before the first ':' (the file for
//                                     "file.py:12:fn"), so one module's frames look alike,
//                                     with a small per-name jitter so adjacent ones still differ.
//   search matches                    magenta         rgb(230,0,230)
#include <string_view>

#include "memsight/frames.h"

namespace memsight::flame {

struct Rgb {
  int r, g, b;
};

// A frame's colour; root: the root "all"; kinds: the kinds of code frames (may be empty).
Rgb frame_color(std::string_view name, bool root, const FrameLabelKinds& kinds);

// A difference graph's frames (FlamegraphOptions::difference): reds under "grew", blues
// under "shrank"; family_root: the "grew" or "shrank" frame itself.
Rgb difference_color(std::string_view name, bool grew, bool family_root,
                     const FrameLabelKinds& kinds);

}  // namespace memsight::flame
