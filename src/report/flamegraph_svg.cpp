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
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/error.h"
#include "memsight/flamegraph.h"
#include "memsight/input_limits.h"
#include "memsight/label.h"
#include "util/escape.h"
#include "util/float_chars.h"
#include "util/lines.h"

namespace memsight {
namespace {

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

[[noreturn]] void bad_line(size_t line_no, const std::string& what) {
  throw Error("folded input line " + std::to_string(line_no) + ": " + what);
}

// For error messages: the offending token, shortened and printable.
std::string quote_token(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 32; ++i) {
    unsigned char c = s[i];
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  if (s.size() > 32) out += "...";
  return out + "'";
}

struct Sample {
  std::string_view stack;
  uint64_t count;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// One "stack count" per line, split at the last space or tab. Trailing whitespace (and so
// CRLF) is tolerated; an empty stack (" 5") counts towards the root alone.
std::vector<Sample> parse_folded(std::string_view text) {
  std::vector<Sample> out;
  size_t line_no = 0;
  for_each_line(text, [&](std::string_view line) {
    ++line_no;
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty()) return;
    size_t sep = line.find_last_of(" \t");
    if (sep == std::string_view::npos) bad_line(line_no, "expected 'stack count'");
    std::string_view count_text = line.substr(sep + 1);
    std::string_view stack = line.substr(0, sep);
    while (!stack.empty() && is_space(stack.back())) stack.remove_suffix(1);
    // torch's folded text has negative "<gaps>" lines where a block's stale
    // requested_size exceeds its size; flamegraph.pl ignores them, and so do we.
    if (count_text.size() > 1 && count_text[0] == '-' &&
        count_text.find_first_not_of("0123456789", 1) == std::string_view::npos)
      return;
    uint64_t count = 0;
    const char* end = count_text.data() + count_text.size();
    // from_chars takes no sign for unsigned types, so "-1" and "+1" are rejected here.
    auto [ptr, ec] = std::from_chars(count_text.data(), end, count);
    if (ec == std::errc::result_out_of_range) {
      bad_line(line_no, "count " + quote_token(count_text) + " does not fit in 64 bits");
    }
    if (ec != std::errc() || ptr != end) {
      bad_line(line_no, "expected 'stack count', got count " + quote_token(count_text) +
                            " (not a non-negative integer)");
    }
    if (count != 0) out.push_back({stack, count});
  });
  return out;
}

// Frame-by-frame lexicographic order: byte order, except that ';' sorts before every other
// byte. Then all stacks that share a frame prefix are contiguous (plain byte order would put
// "a;b-x" between "a;b" and "a;b;c"), so the tree is built in one pass with no lookups.
bool frame_order_less(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  // Stacks share long prefixes; compare 8 bytes at a time to find the first difference.
  while (i + 8 <= n) {
    uint64_t x, y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) {
      if constexpr (std::endian::native == std::endian::little) {
        i += std::countr_zero(x ^ y) / 8;
      } else {
        i += std::countl_zero(x ^ y) / 8;
      }
      break;
    }
    i += 8;
  }
  while (i < n && a[i] == b[i]) ++i;
  if (i == n) return a.size() < b.size();
  unsigned char ca = a[i], cb = b[i];
  if (ca == ';') return true;
  if (cb == ';') return false;
  return ca < cb;
}

// Nodes in depth-first preorder: node i's subtree is [i, end); children are found by
// hopping from i + 1 to the next end.
struct Node {
  std::string_view name;
  uint64_t total;
  uint32_t end;
  uint32_t depth;
};

[[noreturn]] void total_overflow() { throw Error("folded input: total count exceeds 2^64-1"); }

std::vector<Node> build_tree(std::vector<Sample> samples) {
  std::sort(samples.begin(), samples.end(),
            [](const Sample& a, const Sample& b) { return frame_order_less(a.stack, b.stack); });
  std::vector<Node> nodes;
  nodes.push_back({"all", 0, 0, 0});
  std::vector<uint32_t> path = {0};      // open nodes, by depth
  std::vector<std::string_view> frames;  // frames of the current stack
  std::vector<std::string_view> prev;    // frames of the previous stack
  auto close_to = [&](size_t depth) {    // keep path[0..depth]
    while (path.size() > depth + 1) {
      nodes[path.back()].end = static_cast<uint32_t>(nodes.size());
      path.pop_back();
    }
  };
  for (size_t s = 0; s < samples.size();) {
    // Identical stacks are adjacent after the sort: merge them, summing counts.
    std::string_view stack = samples[s].stack;
    uint64_t count = 0;
    for (; s < samples.size() && samples[s].stack == stack; ++s) {
      if (count > UINT64_MAX - samples[s].count) total_overflow();
      count += samples[s].count;
    }
    if (nodes[0].total > UINT64_MAX - count) total_overflow();
    frames.clear();
    for (size_t b = 0; !stack.empty();) {
      size_t e = stack.find(';', b);
      if (e == std::string_view::npos) {
        frames.push_back(stack.substr(b));
        break;
      }
      frames.push_back(stack.substr(b, e - b));
      b = e + 1;
    }
    size_t common = 0;
    while (common < frames.size() && common < prev.size() && frames[common] == prev[common]) {
      ++common;
    }
    close_to(common);
    for (size_t d = common; d < frames.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({frames[d], 0, 0, static_cast<uint32_t>(d + 1)});
    }
    for (uint32_t id : path) nodes[id].total += count;
    std::swap(frames, prev);
  }
  close_to(0);
  nodes[0].end = static_cast<uint32_t>(nodes.size());
  return nodes;
}

// ---- text -------------------------------------------------------------------------------

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Locale-independent "%.{prec}f" (to_chars rounds like printf in the "C" locale).
void append_fixed(std::string& out, double v, int prec) { out += fixed_text(v, prec); }

// 402653184 -> "402,653,184"
std::string with_commas(uint64_t v) {
  std::string digits;
  append_uint(digits, v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// torch.cuda._memory_viz._format_size, exactly. Local on purpose: memsight::format_size
// lives in src/analysis and this file must link without it.
std::string torch_format_size(double num) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
  std::string out;
  for (const char* unit : kUnits) {
    if (std::fabs(num) < 1024.0) {
      append_fixed(out, num, 1);  // "%3.1f": never shorter than 3 characters anyway
      return out + unit + "B";
    }
    num /= 1024.0;
  }
  append_fixed(out, num, 1);
  return out + "YiB";
}

// Frame names are arbitrary bytes. XML 1.0 allows only valid UTF-8 and no control characters
// but tab/CR/LF, so anything else becomes U+FFFD; the result is still unescaped. Returns the
// number of code points through `cps`.
std::string clean_utf8(std::string_view s, size_t* cps) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t') {
        out += kReplacement;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    uint32_t cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0Fu : c & 0x1Fu;
    bool ok = len != 0 && c <= 0xF4 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      unsigned char cc = s[i + k];
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Reject overlong forms, surrogates, code points past U+10FFFF and XML's U+FFFE/U+FFFF.
    ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
         !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE && cp != 0xFFFF;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  if (cps) *cps = n;
  return out;
}

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

// ---- colour -----------------------------------------------------------------------------

struct Rgb {
  int r, g, b;
};

// FNV-1a, then a splitmix64 finaliser so that every bit depends on every input byte.
uint64_t name_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// 21 bits of h starting at `shift`, as a number in [0, 1).
double unit(uint64_t h, int shift) {
  return static_cast<double>((h >> shift) & 0x1FFFFF) / 0x200000;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

Rgb frame_color(std::string_view name, bool root, const FrameLabelKinds& kinds) {
  if (root) return {185, 185, 195};
  if (!kinds.empty()) {
    auto kind = kinds.find(name);
    if (kind && *kind != FrameKind::User) {
      uint64_t h = name_hash(name);
      int j = static_cast<int>(20 * unit(h, 0));
      switch (*kind) {
        case FrameKind::Library:
          return {225 + j / 2, 205 + j / 2, 150 + j};
        case FrameKind::Internal:
          return {185 + j, 185 + j, 190 + j};
        default:
          return {140 + j, 175 + j, 225 + j / 2};
      }
    }
  }
  struct Special {
    std::string_view name;
    Rgb rgb;
  };
  static constexpr Special kSpecial[] = {
      {"active_allocated", {110, 190, 140}}, {"active_pending_free", {210, 205, 110}},
      {"inactive", {200, 200, 200}},         {"<gaps>", {228, 228, 228}},
      {"<non-python>", {195, 178, 225}},     {"only_before", {120, 200, 190}},
      {"only_after", {235, 160, 175}},
  };
  for (const Special& s : kSpecial) {
    if (name == s.name) return s.rgb;
  }
  uint64_t h = name_hash(name);
  if (starts_with(name, "stream_")) return {150, 165, 200};
  if (starts_with(name, "seg_")) {
    return {120 + static_cast<int>(40 * unit(h, 0)), 160 + static_cast<int>(40 * unit(h, 21)),
            210 + static_cast<int>(35 * unit(h, 42))};
  }
  size_t colon = name.find(':');
  double family =
      colon == std::string_view::npos ? unit(h, 0) : unit(name_hash(name.substr(0, colon)), 0);
  return {205 + static_cast<int>(50 * unit(h, 21)),
          70 + static_cast<int>(150 * (0.75 * family + 0.25 * unit(h, 42))),
          20 + static_cast<int>(55 * unit(h, 10))};
}

// A difference graph's frames (FlamegraphOptions::difference): reds under "grew", blues
// under "shrank"; the user's frames (and frames of no known kind) deep, the others pale.
Rgb difference_color(std::string_view name, bool grew, bool family_root,
                     const FrameLabelKinds& kinds) {
  if (family_root) return grew ? Rgb{215, 60, 60} : Rgb{60, 100, 215};
  const auto kind = kinds.find(name);
  const bool pale = kind && *kind != FrameKind::User;
  const int j = static_cast<int>(30 * unit(name_hash(name), 0));
  if (grew) return pale ? Rgb{240, 175 + j, 165 + j} : Rgb{225 + j / 3, 85 + j, 75 + j};
  return pale ? Rgb{170 + j, 190 + j, 240} : Rgb{85 + j, 125 + j, 225 + j / 3};
}

// ---- document ---------------------------------------------------------------------------

constexpr std::string_view kStyle = R"(<style>
text { font-family: Verdana, DejaVu Sans, sans-serif; font-size: 12px; fill: rgb(0,0,0); }
#title { font-size: 17px; text-anchor: middle; }
#hint { font-size: 11px; fill: rgb(120,120,120); text-anchor: middle; }
#search, #matched { text-anchor: end; }
.btn { fill: rgb(30,80,170); cursor: pointer; }
.btn:hover { text-decoration: underline; }
.f { cursor: pointer; }
.f:hover rect { stroke: rgb(40,40,40); stroke-width: 0.6; }
.anc rect { fill: rgb(215,215,215); }
.anc text { fill: rgb(110,110,110); }
.hid { display: none; }
</style>
)";

// Zoom, search and hover: the body of a function that render_flamegraph_svg() opens with the
// constants W, PAD, TOTAL, CHAR_W and LABEL_PAD (nothing leaks into the global scope, so the
// SVG can be inlined next to another). Plain ES2017, no dependencies. Must not contain the
// CDATA end marker (a unit test checks).
constexpr std::string_view kScript = R"JS(
  const AVAIL = W - 2 * PAD;
  const HIGHLIGHT = 'rgb(230,0,230)';
  const byId = (id) => document.getElementById(id);
  const frames = byId('frames'), details = byId('details'), matched = byId('matched');
  const unzoomBtn = byId('unzoom'), searchBtn = byId('search');
  const items = new Map();
  for (const g of frames.children) {
    const title = g.children[0].textContent, rect = g.children[1];
    items.set(g, {
      g, rect, text: g.children[2], name: title.slice(0, title.lastIndexOf(' (')),
      x: Number(g.getAttribute('data-x')), w: Number(g.getAttribute('data-w')),
      y: Number(rect.getAttribute('y')), fill: rect.getAttribute('fill'),
    });
  }
  const root = items.get(frames.children[0]);

  // Same rule as fit_label() in flamegraph_svg.cpp; counts code points, not UTF-16 units.
  const fit = (name, width) => {
    const room = Math.floor((width - 2 * LABEL_PAD) / CHAR_W);
    if (room < 3) return '';
    const cps = Array.from(name);
    return cps.length <= room ? name : cps.slice(0, room - 2).join('') + '..';
  };
  const place = (it, fx, fw) => {
    const x = PAD + fx * AVAIL, w = fw * AVAIL;
    it.rect.setAttribute('x', x.toFixed(2));
    it.rect.setAttribute('width', w.toFixed(2));
    it.text.setAttribute('x', (x + LABEL_PAD).toFixed(2));
    it.text.textContent = fit(it.name, w);
  };

  // The clicked frame spans the full width; its descendants scale with it; its ancestors
  // stay, full width and greyed; everything else is hidden.
  const zoom = (t) => {
    for (const it of items.values()) {
      it.g.classList.remove('hid', 'anc');
      if (it.y < t.y) {
        if (it.x <= t.x && it.x + it.w >= t.x + t.w) {
          place(it, 0, 1);
          it.g.classList.add('anc');
        } else {
          it.g.classList.add('hid');
        }
      } else if (it.x >= t.x && it.x + it.w <= t.x + t.w) {
        place(it, (it.x - t.x) / t.w, it.w / t.w);
      } else {
        it.g.classList.add('hid');
      }
    }
    unzoomBtn.classList.toggle('hid', t === root);
  };

  let term = '';
  const clearSearch = () => {
    for (const it of items.values()) it.rect.setAttribute('fill', it.fill);
    matched.textContent = ' ';
    term = '';
  };
  // Highlights frames whose name matches (a regular expression, or the literal text when it
  // is not one) and reports the share of the total they cover, counting nested matches once.
  const search = (s) => {
    clearSearch();
    if (!s) return;
    term = s;
    let re;
    try {
      re = new RegExp(s);
    } catch (e) {
      re = new RegExp(s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    }
    const hits = [];
    for (const it of items.values()) {
      if (re.test(it.name)) {
        it.rect.setAttribute('fill', HIGHLIGHT);
        hits.push(it);
      }
    }
    hits.sort((a, b) => a.x - b.x || b.w - a.w);
    let sum = 0, end = -1;
    for (const h of hits) {
      if (h.x >= end) {
        sum += h.w;
        end = h.x + h.w;
      }
    }
    matched.textContent = 'Matched: ' + (100 * sum / TOTAL).toFixed(1) + '%';
  };
  const ask = () => {
    const s = prompt('Search frames (regular expression or text; empty clears):', term);
    if (s !== null) search(s);
  };

  const frameOf = (e) => items.get(e.target.closest('g.f'));
  frames.addEventListener('mouseover', (e) => {
    const it = frameOf(e);
    if (it) details.textContent = it.g.children[0].textContent;
  });
  frames.addEventListener('mouseout', () => { details.textContent = ' '; });
  frames.addEventListener('click', (e) => {
    const it = frameOf(e);
    if (it) zoom(it);
  });
  unzoomBtn.addEventListener('click', () => zoom(root));
  searchBtn.addEventListener('click', ask);
  window.addEventListener('keydown', (e) => {
    if (e.key === 'F3' || ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F'))) {
      e.preventDefault();
      ask();
    } else if (e.key === 'Escape') {
      clearSearch();
    }
  });
)JS";

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

std::string render_samples(std::vector<Sample> samples, const FlamegraphOptions& opts) {
  if (opts.width < kMinSvgWidth) {
    throw Error("flamegraph width must be at least " + std::to_string(kMinSvgWidth) + " px, got " +
                std::to_string(opts.width));
  }
  const std::vector<Node> nodes = build_tree(std::move(samples));
  const uint64_t total = nodes[0].total;
  if (total == 0) return render_empty(opts.width, opts);

  const double avail = opts.width - 2 * kPad;
  const double scale = avail / static_cast<double>(total);
  const std::string count_name = clean_utf8(opts.count_name, nullptr);

  // Preorder walk. cursor[d] is where the next frame at depth d starts: a parent resets it to
  // its own start, each child advances it by its count.
  std::string body;
  std::vector<uint64_t> cursor = {0};
  uint32_t max_depth = 0;
  bool grew = false;  // a difference graph: under "grew" (else "shrank")
  for (uint32_t i = 0; i < nodes.size();) {
    const Node& n = nodes[i];
    if (cursor.size() < n.depth + 2u) cursor.resize(n.depth + 2u);
    const uint64_t start = cursor[n.depth];
    cursor[n.depth] += n.total;
    cursor[n.depth + 1] = start;
    const double w = static_cast<double>(n.total) * scale;
    if (w < kMinWidth) {  // too narrow to see: skip the frame and everything under it
      i = n.end;
      continue;
    }
    max_depth = std::max(max_depth, n.depth);
    const double x = kPad + static_cast<double>(start) * scale;
    const double y = kTop + n.depth * kRow;
    size_t cps = 0;
    // A frame name past kNameLimit bytes is cut, saying how much (one long
    // file name in every frame would otherwise repeat in every node).
    const std::string name = clean_utf8(cut_name(n.name), &cps);
    if (n.depth == 1) grew = n.name == "grew";
    const Rgb c = opts.difference && n.depth > 0
                      ? difference_color(n.name, grew, n.depth == 1, opts.frame_kinds)
                      : frame_color(n.name, i == 0, opts.frame_kinds);

    body += "<g class=\"f\" data-x=\"";
    append_uint(body, start);
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
    append_fixed(body, x, 2);
    body += "\" y=\"";
    append_fixed(body, y, 1);
    body += "\" width=\"";
    append_fixed(body, w, 2);
    body += "\" height=\"";
    append_fixed(body, kRectH, 1);
    body += "\" rx=\"2\" ry=\"2\" fill=\"rgb(" + std::to_string(c.r) + ',' + std::to_string(c.g) +
            ',' + std::to_string(c.b) + ")\"/><text x=\"";
    append_fixed(body, x + kLabelPad, 2);
    body += "\" y=\"";
    append_fixed(body, y + 10.5, 1);
    body += "\">";
    append_xml_escaped(body, fit_label(name, cps, w));
    body += "</text></g>\n";
    ++i;
  }

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
  out +=
      "\"> </text>\n<script type=\"text/ecmascript\"><![CDATA[\n(() => {\n  'use strict';\n  const "
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
  out += "})();\n]]></script>\n</svg>\n";
  return out;
}

}  // namespace

}  // namespace memsight
