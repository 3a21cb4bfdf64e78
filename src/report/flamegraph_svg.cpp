// Folded stacks -> one self-contained interactive SVG flamegraph. Replaces Brendan Gregg's
// flamegraph.pl, which torch downloads at run time: same input, same merge semantics, but the
// output has no external resources at all (no fonts, no links), so it opens offline and is
// byte-identical for the same input.
//
// Layout: an icicle graph. The root "all" is the TOP row and callees grow downward, so the
// root and the widest frames are on screen without scrolling however deep the stacks are.
// Siblings are sorted by name, left to right; a frame's self count is the unfilled space to
// the right of its children.
//
//   y=24   [Reset Zoom]              title                          [Search]
//   y=42                 click a frame to zoom, Ctrl-F to search
//   y=56   | all                                                          |  row 0
//          | stream_0                              | stream_7             |  row 1
//          | seg_...        | seg_...    |...                             |  ...
//   H-10   details of the hovered frame                          Matched: x%
//
// Each frame is <g class="f" data-x="START" data-w="COUNT"><title>hover text</title><rect/>
// <text>label</text></g>, START and COUNT in input units (integers), so the embedded script
// can zoom exactly without re-reading the input. Frames narrower than 0.1px are not drawn
// (their count stays in their parents), which bounds the output by width x depth, not by
// the number of input lines; like flamegraph.pl, zooming does not bring them back.
//
//
// Colours: flame_colors.h; the tree of frames: flame_tree.h; the style sheet and script:
// flame_script.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/error.h"
#include "memsight/flamegraph.h"
#include "memsight/input_limits.h"
#include "memsight/label.h"
#include "report/flame_colors.h"
#include "report/flame_script.h"
#include "report/flame_text.h"
#include "report/flame_tree.h"
#include "util/escape.h"

namespace memsight {
namespace {

using namespace flame;

// Geometry in px.
constexpr double kPad = 10;  // left and right margin
constexpr double kTop = 56;  // y of row 0
constexpr double kRow = 16;  // row pitch; rectangles are 15px high, leaving a 1px gap
constexpr double kRectH = 15;
constexpr double kFontSize = 12;
// Average advance of Verdana / DejaVu Sans digits and lower case, as a fraction of the font
// size (flamegraph.pl uses the same estimate). Labels are fitted with it rather than measured
// so that the output does not depend on the fonts of the machine that renders it.
constexpr double kCharWidth = 0.59 * kFontSize;
constexpr double kLabelPad = 3;  // label inset from the rectangle's left edge
constexpr double kMinWidth = 0.1;
constexpr int kMinSvgWidth = 200;

// The label that fits `width` px: the name, or its first characters and "..", or nothing.
// The script's fit() does the same after a zoom.
std::string fit_label(const std::string& name, size_t cps, double width) {
  double room = std::floor((width - 2 * kLabelPad) / kCharWidth);
  if (room < 3) return "";
  size_t max_chars = static_cast<size_t>(room);
  if (cps <= max_chars) return name;
  size_t keep = max_chars - 2;  // code points; never cut a UTF-8 sequence
  size_t i = 0;
  for (size_t k = 0; k < keep; ++k) {
    ++i;
    while (i < name.size() && (static_cast<unsigned char>(name[i]) & 0xC0) == 0x80) ++i;
  }
  return name.substr(0, i) + "..";
}

void open_document(std::string& out, int width, double height, const FlamegraphOptions& opts) {
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" ";
  out += "version=\"1.1\" width=\"" + std::to_string(width) + "\" height=\"";
  append_fixed(out, height, 0);
  out += "\" viewBox=\"0 0 " + std::to_string(width) + " ";
  append_fixed(out, height, 0);
  out += "\">\n<!-- memsight flamegraph -->\n";
  out += kStyle;
  out += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"";
  append_fixed(out, height, 0);
  out += "\" fill=\"rgb(250,250,250)\"/>\n<text id=\"title\" x=\"";
  append_fixed(out, width / 2.0, 1);
  out += "\" y=\"24\">";
  append_xml_escaped(out, clean_utf8(opts.title, nullptr));
  out += "</text>\n";
}

std::string render_empty(int width, const FlamegraphOptions& opts) {
  std::string out;
  open_document(out, width, 100, opts);
  out += "<text id=\"hint\" x=\"";
  append_fixed(out, width / 2.0, 1);
  out += "\" y=\"64\">no data</text>\n</svg>\n";
  return out;
}

std::string render_samples(std::vector<Sample> samples, const FlamegraphOptions& opts);

}  // namespace

std::string render_flamegraph_svg(std::string_view folded, const FlamegraphOptions& opts) {
  return render_samples(parse_folded(folded), opts);
}

std::string render_flamegraph_svg(const Folded& folded, const FlamegraphOptions& opts) {
  std::vector<Sample> samples;
  samples.reserve(folded.lines.size());
  for (const FoldedLine& l : folded.lines)
    if (l.count > 0)
      samples.push_back(
          {std::string_view(folded.text).substr(l.begin, l.size), static_cast<uint64_t>(l.count)});
  return render_samples(std::move(samples), opts);
}

namespace {

// One frame: <g> with its hover text, rectangle and label.
struct FrameBox {
  uint64_t start = 0;
  double x = 0, y = 0, w = 0;
  Rgb color;
};

void append_frame(std::string& body, const Node& n, const FrameBox& f, uint64_t total,
                  const std::string& count_name, const FlamegraphOptions& opts) {
  size_t cps = 0;
  // A frame name past kNameLimit bytes is cut, saying how much (one long
  // file name in every frame would otherwise repeat in every node).
  const std::string name = clean_utf8(cut_name(n.name), &cps);
  body += "<g class=\"f\" data-x=\"";
  append_uint(body, f.start);
  body += "\" data-w=\"";
  append_uint(body, n.total);
  body += "\"><title>";
  append_xml_escaped(body, name);
  body += " (";
  if (opts.bytes) body += torch_format_size(static_cast<double>(n.total)) + ", ";
  body += with_commas(n.total);
  body += ' ';
  append_xml_escaped(body, count_name);
  body += ", ";
  append_fixed(body, 100.0 * static_cast<double>(n.total) / static_cast<double>(total), 2);
  body += "%)</title><rect x=\"";
  append_fixed(body, f.x, 2);
  body += "\" y=\"";
  append_fixed(body, f.y, 1);
  body += "\" width=\"";
  append_fixed(body, f.w, 2);
  body += "\" height=\"";
  append_fixed(body, kRectH, 1);
  body += "\" rx=\"2\" ry=\"2\" fill=\"rgb(" + std::to_string(f.color.r) + ',' +
          std::to_string(f.color.g) + ',' + std::to_string(f.color.b) + ")\"/><text x=\"";
  append_fixed(body, f.x + kLabelPad, 2);
  body += "\" y=\"";
  append_fixed(body, f.y + 10.5, 1);
  body += "\">";
  append_xml_escaped(body, fit_label(name, cps, f.w));
  body += "</text></g>\n";
}

// The frames wide enough to see, in preorder; returns the deepest row drawn.
uint32_t append_frames(std::string& body, const std::vector<Node>& nodes,
                       const FlamegraphOptions& opts) {
  const uint64_t total = nodes[0].total;
  const double scale = (opts.width - 2 * kPad) / static_cast<double>(total);
  const std::string count_name = clean_utf8(opts.count_name, nullptr);
  // cursor[d] is where the next frame at depth d starts: a parent resets it to its own
  // start, each child advances it by its count.
  std::vector<uint64_t> cursor = {0};
  uint32_t max_depth = 0;
  bool grew = false;  // a difference graph: under "grew" (else "shrank")
  for (uint32_t i = 0; i < nodes.size();) {
    const Node& n = nodes[i];
    if (cursor.size() < n.depth + 2u) cursor.resize(n.depth + 2u);
    FrameBox f;
    f.start = cursor[n.depth];
    cursor[n.depth] += n.total;
    cursor[n.depth + 1] = f.start;
    f.w = static_cast<double>(n.total) * scale;
    if (f.w < kMinWidth) {  // too narrow to see: skip the frame and everything under it
      i = n.end;
      continue;
    }
    max_depth = std::max(max_depth, n.depth);
    f.x = kPad + static_cast<double>(f.start) * scale;
    f.y = kTop + n.depth * kRow;
    if (n.depth == 1) grew = n.name == "grew";
    f.color = opts.difference && n.depth > 0
                  ? difference_color(n.name, grew, n.depth == 1, opts.frame_kinds)
                  : frame_color(n.name, i == 0, opts.frame_kinds);
    append_frame(body, n, f, total, count_name, opts);
    ++i;
  }
  return max_depth;
}

// The script's opening: its constants, then kScript.
void append_script(std::string& out, uint64_t total, const FlamegraphOptions& opts) {
  out +=
      "<script type=\"text/ecmascript\"><![CDATA[\n(() => {\n  'use strict';\n  const "
      "W = ";
  out += std::to_string(opts.width);
  out += ", PAD = ";
  append_fixed(out, kPad, 1);
  out += ", TOTAL = ";
  append_uint(out, total);
  out += ", CHAR_W = ";
  append_fixed(out, kCharWidth, 3);
  out += ", LABEL_PAD = ";
  append_fixed(out, kLabelPad, 1);
  out += ";";
  out += kScript;
  out += "})();\n]]></script>\n";
}

std::string render_samples(std::vector<Sample> samples, const FlamegraphOptions& opts) {
  if (opts.width < kMinSvgWidth) {
    throw Error("flamegraph width must be at least " + std::to_string(kMinSvgWidth) + " px, got " +
                std::to_string(opts.width));
  }
  const std::vector<Node> nodes = build_tree(std::move(samples));
  const uint64_t total = nodes[0].total;
  if (total == 0) return render_empty(opts.width, opts);
  std::string body;
  const uint32_t max_depth = append_frames(body, nodes, opts);

  const double frames_bottom = kTop + (max_depth + 1) * kRow;
  const double height = frames_bottom + 30;
  std::string out;
  out.reserve(body.size() + kScript.size() + 4096);
  open_document(out, opts.width, height, opts);
  out += "<text id=\"hint\" x=\"";
  append_fixed(out, opts.width / 2.0, 1);
  out += "\" y=\"42\">click a frame to zoom, Ctrl-F to search, Esc to clear the search</text>\n";
  out += "<text id=\"unzoom\" class=\"btn hid\" x=\"";
  append_fixed(out, kPad, 1);
  out += "\" y=\"24\">Reset Zoom</text>\n<text id=\"search\" class=\"btn\" x=\"";
  append_fixed(out, opts.width - kPad, 1);
  out += "\" y=\"24\">Search</text>\n<g id=\"frames\">\n";
  out += body;
  out += "</g>\n<text id=\"details\" x=\"";
  append_fixed(out, kPad, 1);
  out += "\" y=\"";
  append_fixed(out, frames_bottom + 20, 1);
  out += "\"> </text>\n<text id=\"matched\" x=\"";
  append_fixed(out, opts.width - kPad, 1);
  out += "\" y=\"";
  append_fixed(out, frames_bottom + 20, 1);
  out += "\"> </text>\n";
  append_script(out, total, opts);
  out += "</svg>\n";
  return out;
}

}  // namespace

}  // namespace memsight
