// render_flamegraph_svg: merge semantics, geometry, XML safety, determinism, colours, errors.
#include "memsight/flamegraph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "memsight/error.h"

#ifndef MEMSIGHT_TEST_DATA
#define MEMSIGHT_TEST_DATA "tests/data"
#endif

namespace memsight {
namespace {

// ---- a small XML well-formedness check ------------------------------------------------------
// Enough to catch what a renderer can get wrong: invalid UTF-8 or control characters, raw
// '<' or a bad entity in text or attributes, unquoted attributes, unbalanced tags, content
// after the root. Returns "" when the document is well formed.

std::string utf8_problem(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
        return "control char at " + std::to_string(i);
      ++i;
      continue;
    }
    size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (len == 0 || i + len > s.size()) return "bad UTF-8 at " + std::to_string(i);
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
        return "bad UTF-8 at " + std::to_string(i);
    }
    i += len;
  }
  return "";
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' ||
         c == '.';
}

// Character data or an attribute value: no '<', every '&' starts a known entity.
std::string text_problem(std::string_view t) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '<') return "raw '<' in text";
    if (t[i] != '&') continue;
    size_t semi = t.find(';', i);
    if (semi == std::string_view::npos) return "unterminated entity";
    std::string_view ent = t.substr(i + 1, semi - i - 1);
    bool ok = ent == "amp" || ent == "lt" || ent == "gt" || ent == "quot" || ent == "apos" ||
              (ent.size() > 1 && ent[0] == '#');
    if (!ok) return "unknown entity &" + std::string(ent) + ";";
  }
  return "";
}

std::string xml_problem(std::string_view s) {
  if (std::string p = utf8_problem(s); !p.empty()) return p;
  size_t i = 0;
  if (s.substr(0, 5) == "<?xml") i = s.find("?>") + 2;
  std::vector<std::string> open;
  bool seen_root = false;
  while (i < s.size()) {
    size_t lt = s.find('<', i);
    std::string_view text = s.substr(i, (lt == std::string_view::npos ? s.size() : lt) - i);
    if (open.empty() && text.find_first_not_of(" \t\r\n") != std::string_view::npos) {
      return "text outside the root element";
    }
    if (std::string p = text_problem(text); !p.empty()) return p;
    if (lt == std::string_view::npos) break;
    i = lt;
    if (s.substr(i, 4) == "<!--") {
      size_t e = s.find("-->", i);
      if (e == std::string_view::npos) return "unterminated comment";
      i = e + 3;
    } else if (s.substr(i, 9) == "<![CDATA[") {
      size_t e = s.find("]]>", i);
      if (e == std::string_view::npos || open.empty()) return "bad CDATA";
      i = e + 3;
    } else if (s.substr(i, 2) == "</") {
      size_t e = s.find('>', i);
      if (e == std::string_view::npos) return "unterminated end tag";
      std::string name(s.substr(i + 2, e - i - 2));
      if (open.empty() || open.back() != name) return "mismatched </" + name + ">";
      open.pop_back();
      i = e + 1;
    } else {
      if (open.empty() && seen_root) return "second root element";
      ++i;
      size_t b = i;
      while (i < s.size() && is_name_char(s[i])) ++i;
      if (i == b) return "bad tag name at " + std::to_string(b);
      std::string name(s.substr(b, i - b));
      for (;;) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i >= s.size()) return "unterminated tag";
        if (s.substr(i, 2) == "/>") {
          i += 2;
          break;
        }
        if (s[i] == '>') {
          open.push_back(name);
          ++i;
          break;
        }
        size_t ab = i;
        while (i < s.size() && is_name_char(s[i])) ++i;
        if (i == ab || i >= s.size() || s[i] != '=') return "bad attribute in <" + name + ">";
        ++i;
        char q = i < s.size() ? s[i] : 0;
        if (q != '"' && q != '\'') return "unquoted attribute in <" + name + ">";
        size_t e = s.find(q, i + 1);
        if (e == std::string_view::npos) return "unterminated attribute";
        if (std::string p = text_problem(s.substr(i + 1, e - i - 1)); !p.empty()) return p;
        i = e + 1;
      }
      seen_root = true;
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (!seen_root) return "no root element";
  return "";
}

// ---- reading frames back --------------------------------------------------------------------

std::string attr(std::string_view tag, const std::string& name) {
  size_t p = tag.find(" " + name + "=\"");
  if (p == std::string_view::npos) return "";
  p += name.size() + 3;
  return std::string(tag.substr(p, tag.find('"', p) - p));
}

struct Frame {
  std::string title, fill, label;
  uint64_t data_x = 0, data_w = 0;
  double x = 0, y = 0, width = 0;
  std::string name() const { return title.substr(0, title.rfind(" (")); }
};

std::vector<Frame> frames_of(const std::string& svg) {
  std::vector<Frame> out;
  for (size_t p = svg.find("<g class=\"f\""); p != std::string::npos;
       p = svg.find("<g class=\"f\"", p + 1)) {
    std::string g = svg.substr(p, svg.find("</g>", p) - p);
    Frame f;
    f.data_x = std::stoull(attr(g, "data-x"));
    f.data_w = std::stoull(attr(g, "data-w"));
    size_t t = g.find("<title>") + 7;
    f.title = g.substr(t, g.find("</title>") - t);
    std::string rect = g.substr(g.find("<rect"));
    f.x = std::stod(attr(rect, "x"));
    f.y = std::stod(attr(rect, "y"));
    f.width = std::stod(attr(rect, "width"));
    f.fill = attr(rect, "fill");
    size_t l = g.find('>', g.find("<text")) + 1;
    f.label = g.substr(l, g.find("</text>", l) - l);
    out.push_back(f);
  }
  return out;
}

std::vector<Frame> named(const std::vector<Frame>& frames, const std::string& name) {
  std::vector<Frame> out;
  for (const Frame& f : frames) {
    if (f.name() == name) out.push_back(f);
  }
  return out;
}

// The one frame called `name` (as escaped in the SVG); a test failure, not a crash, otherwise.
Frame one(const std::vector<Frame>& frames, const std::string& name) {
  std::vector<Frame> found = named(frames, name);
  if (found.size() != 1) {
    ADD_FAILURE() << found.size() << " frames named '" << name << "'";
    return Frame{};
  }
  return found[0];
}

FlamegraphOptions counts() {
  FlamegraphOptions o;
  o.bytes = false;
  o.count_name = "samples";
  return o;
}

std::string error_of(std::string_view folded) {
  try {
    render_flamegraph_svg(folded);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- tests ----------------------------------------------------------------------------------

TEST(Flamegraph, MergesDuplicateStacksAndSumsCounts) {
  std::string svg = render_flamegraph_svg("a;b 1\na;c 2\na;b 3\nx 4\na;b 0\n", counts());
  auto frames = frames_of(svg);
  ASSERT_EQ(named(frames, "b").size(), 1u);
  EXPECT_EQ(one(frames, "b").data_w, 4u);
  EXPECT_EQ(one(frames, "a").data_w, 6u);
  EXPECT_EQ(one(frames, "all").data_w, 10u);
  EXPECT_NE(svg.find("<title>b (4 samples, 40.00%)</title>"), std::string::npos) << svg;
}

TEST(Flamegraph, OneNodePerFrameEvenWhenByteOrderInterleaves) {
  // Byte order sorts "a;b-x" between "a;b" and "a;b;c"; "b" must still be one frame. The
  // long variant puts the difference past the first 8-byte words the comparison skips.
  for (std::string p : {"", "a_frame_name_longer_than_a_word.py:12:fn;"}) {
    std::string in = p + "b 1\n" + p + "b;c 2\n" + p + "b-x 4\n" + p + "b;c 8\n" + p + "b+ 16\n";
    auto frames = frames_of(render_flamegraph_svg(in, counts()));
    ASSERT_EQ(named(frames, "b").size(), 1u) << p;
    EXPECT_EQ(one(frames, "b").data_w, 11u);
    EXPECT_EQ(one(frames, "c").data_w, 10u);
    EXPECT_EQ(one(frames, "c").data_x, one(frames, "b").data_x);
  }
}

TEST(Flamegraph, ZeroCountLinesContributeNothing) {
  auto frames = frames_of(render_flamegraph_svg("ghost;g 0\nreal 5\n", counts()));
  EXPECT_TRUE(named(frames, "ghost").empty());
  EXPECT_EQ(one(frames, "all").data_w, 5u);
}

TEST(Flamegraph, WidthsAreProportionalToCounts) {
  FlamegraphOptions o = counts();
  o.width = 1000;
  auto frames = frames_of(render_flamegraph_svg("root;x 1\nroot;y 3\nroot 4\n_first 8\n", o));
  Frame all = one(frames, "all"), root = one(frames, "root");
  Frame x = one(frames, "x"), y = one(frames, "y");
  EXPECT_NEAR(all.width, 980.0, 0.01);  // full width less the margins
  EXPECT_NEAR(root.width, all.width / 2, 0.01);
  EXPECT_NEAR(x.width, all.width / 16, 0.01);
  EXPECT_NEAR(y.width, 3 * x.width, 0.02);
  // Children sorted by name, left to right from the parent's left edge; self time on the right.
  EXPECT_NEAR(x.x, root.x, 0.01);
  EXPECT_NEAR(y.x, x.x + x.width, 0.01);
  EXPECT_NEAR(root.x, all.x + all.width / 2, 0.01);  // after "_first"
  EXPECT_EQ(x.data_x, 8u);
  EXPECT_EQ(y.data_x, 9u);
  // Icicle: the root is the top row, each level 16px lower.
  EXPECT_LT(all.y, root.y);
  EXPECT_NEAR(x.y - root.y, 16.0, 0.01);
}

TEST(Flamegraph, SkipsFramesNarrowerThanATenthOfAPixel) {
  auto frames = frames_of(render_flamegraph_svg("big 1000000\ntiny;deeper 1\n", counts()));
  EXPECT_TRUE(named(frames, "tiny").empty());
  EXPECT_TRUE(named(frames, "deeper").empty());
  EXPECT_EQ(one(frames, "all").data_w, 1000001u);  // still counted in the parent
}

TEST(Flamegraph, OutputIsWellFormedXmlWithEscapedNames) {
  std::string in =
      "stream_0;make.py:241:<module>;a&b;q\"uote;it's;x>y 10\n"
      "\xC3\xBC\xE6\x97\xA5\xE6\x9C\xAC;bad\xFF\xFEutf8;ctl\x01x;x]]>y 5\n";
  FlamegraphOptions o;
  o.title = "<title> & 'quotes' \"too\"";
  std::string svg = render_flamegraph_svg(in, o);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.find("<module>"), std::string::npos);
  EXPECT_NE(svg.find("make.py:241:&lt;module&gt;"), std::string::npos);
  EXPECT_NE(svg.find("a&amp;b ("), std::string::npos);
  EXPECT_NE(svg.find("q&quot;uote"), std::string::npos);
  EXPECT_NE(svg.find("it&apos;s"), std::string::npos);
  EXPECT_NE(svg.find("&lt;title&gt; &amp; &apos;quotes&apos; &quot;too&quot;"), std::string::npos);
  EXPECT_NE(svg.find("\xC3\xBC\xE6\x97\xA5\xE6\x9C\xAC ("), std::string::npos);  // UTF-8 kept
  EXPECT_NE(svg.find("bad\xEF\xBF\xBD\xEF\xBF\xBDutf8"), std::string::npos);     // U+FFFD
  EXPECT_NE(svg.find("ctl\xEF\xBF\xBDx"), std::string::npos);
}

TEST(Flamegraph, XmlCheckerCatchesMistakes) {
  // The checker must be able to fail, or the test above proves nothing.
  EXPECT_NE(xml_problem("<svg><text>a<module>b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><rect x=\"1\" y=2/></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>\xFF</text></svg>"), "");
  EXPECT_EQ(xml_problem("<svg><text a=\"&lt;\">&amp;</text></svg>"), "");
}

TEST(Flamegraph, SelfContainedAndInteractive) {
  std::string svg = render_flamegraph_svg("a;b 1\n");
  // Only the SVG namespace URI; no links, fonts, images or external scripts.
  size_t urls = 0;
  for (size_t p = svg.find("://"); p != std::string::npos; p = svg.find("://", p + 1)) ++urls;
  EXPECT_EQ(urls, 1u);
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);
  EXPECT_EQ(svg.find("url("), std::string::npos);
  EXPECT_EQ(svg.find("@import"), std::string::npos);
  // One script in one CDATA section that nothing inside terminates early.
  size_t cdata = svg.find("<![CDATA[");
  ASSERT_NE(cdata, std::string::npos);
  EXPECT_EQ(svg.find("]]>"), svg.find("]]></script>"));
  EXPECT_EQ(svg.find("]]>", svg.find("]]>") + 1), std::string::npos);
  for (const char* needle : {"id=\"unzoom\"", "Reset Zoom", "id=\"search\"", "prompt(",
                             "id=\"details\"", "id=\"matched\"", "Matched: ", "keydown"}) {
    EXPECT_NE(svg.find(needle), std::string::npos) << needle;
  }
}

TEST(Flamegraph, HoverTextFormatsSizesLikeTorch) {
  auto frames = frames_of(render_flamegraph_svg("a 1992294\nb 1023\nc 1024\nd 1280\n"));
  EXPECT_EQ(one(frames, "a").title, "a (1.9MiB, 1,992,294 bytes, 99.83%)");
  EXPECT_EQ(one(frames, "b").title.substr(0, 10), "b (1023.0B");
  EXPECT_EQ(one(frames, "c").title.substr(0, 10), "c (1.0KiB,");
  EXPECT_EQ(one(frames, "d").title.substr(0, 10), "d (1.2KiB,");  // %.1f rounds half to even
  auto huge = frames_of(render_flamegraph_svg("z 18446744073709551615\n"));
  EXPECT_EQ(one(huge, "z").title.substr(0, 10), "z (16.0EiB");
}

TEST(Flamegraph, LabelsAreTruncatedToFit) {
  std::string longname(300, 'n');
  auto frames = frames_of(render_flamegraph_svg(longname + " 1\nw 1\n" + "\xC3\xA9\xC3\xA9" +
                                                std::string(200, 'e') + " 1\n"));
  std::string label = one(frames, longname).label;
  ASSERT_GE(label.size(), 3u);
  EXPECT_LT(label.size(), longname.size());
  EXPECT_EQ(label.substr(label.size() - 2), "..");
  EXPECT_EQ(one(frames, "w").label, "w");
  EXPECT_EQ(one(frames, "all").label, "all");
  std::string accented = one(frames, "\xC3\xA9\xC3\xA9" + std::string(200, 'e')).label;
  EXPECT_EQ(accented.substr(0, 6),
            "\xC3\xA9\xC3\xA9"
            "ee");
  for (const Frame& f : frames) {
    size_t chars = std::count_if(f.label.begin(), f.label.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    });
    // ~7.08px per character plus the 3px insets on both sides.
    EXPECT_LE(chars * 7.08 + 6, f.width + 0.01) << f.label;
    EXPECT_EQ(utf8_problem(f.label), "");  // never cuts a UTF-8 sequence
  }
}

TEST(Flamegraph, DeterministicAndIndependentOfLineOrder) {
  std::string in = read_file(std::string(MEMSIGHT_TEST_DATA) + "/oom.segments.folded");
  if (in.empty()) GTEST_SKIP() << "tests/data/oom.segments.folded not found";
  std::string a = render_flamegraph_svg(in), b = render_flamegraph_svg(in);
  EXPECT_EQ(a, b);
  EXPECT_EQ(xml_problem(a), "");
  std::vector<std::string> lines;
  std::istringstream ss(in);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  std::shuffle(lines.begin(), lines.end(), std::mt19937(42));
  std::string shuffled;
  for (const std::string& l : lines) shuffled += l + "\r\n";
  EXPECT_EQ(render_flamegraph_svg(shuffled), a);
}

TEST(Flamegraph, ColoursDependOnTheNameOnly) {
  auto first = frames_of(render_flamegraph_svg("x;foo.py:1:f 1\nbar 2\n"));
  auto second = frames_of(render_flamegraph_svg("foo.py:1:f;zzz 7\n"));
  EXPECT_EQ(one(first, "foo.py:1:f").fill, one(second, "foo.py:1:f").fill);
  EXPECT_NE(one(first, "foo.py:1:f").fill, one(first, "bar").fill);

  auto rgb = [](const std::string& fill) {
    int r = 0, g = 0, b = 0;
    EXPECT_EQ(std::sscanf(fill.c_str(), "rgb(%d,%d,%d)", &r, &g, &b), 3) << fill;
    return std::vector<int>{r, g, b};
  };
  auto frames = frames_of(render_flamegraph_svg(
      "stream_0;seg_1;active_allocated;m.py:1:f 4\nstream_0;seg_2;inactive 4\n"
      "stream_0;seg_2;<gaps> 4\nstream_0;seg_3;active_pending_free;<non-python> 4\n"));
  // Code frames: warm (red dominant, little blue). Segments: blue dominant.
  auto code = rgb(one(frames, "m.py:1:f").fill);
  EXPECT_GE(code[0], 205);
  EXPECT_GT(code[0], code[2] + 100);
  for (const char* seg : {"seg_1", "seg_2", "seg_3"}) {
    auto c = rgb(one(frames, seg).fill);
    EXPECT_GT(c[2], c[0]) << seg;
  }
  EXPECT_NE(one(frames, "seg_1").fill, one(frames, "seg_2").fill);
  // The allocator states each have their own fixed colour.
  std::vector<std::string> fills;
  for (const char* s : {"active_allocated", "inactive", "&lt;gaps&gt;", "active_pending_free",
                        "&lt;non-python&gt;", "stream_0", "all"}) {
    fills.push_back(one(frames, s).fill);
  }
  std::sort(fills.begin(), fills.end());
  EXPECT_EQ(std::unique(fills.begin(), fills.end()), fills.end());
  EXPECT_EQ(one(frames, "inactive").fill, "rgb(200,200,200)");
  EXPECT_EQ(one(frames, "all").fill, "rgb(185,185,195)");
}

TEST(Flamegraph, NegativeCountsAreSkippedLikeFlamegraphPl) {
  // torch emits "<gaps> -N" for blocks whose stale requested_size exceeds their size.
  std::string with = render_flamegraph_svg("s;inactive;<gaps> -14848\ns;inactive;x 100\n");
  std::string without = render_flamegraph_svg("s;inactive;x 100\n");
  EXPECT_EQ(with, without);
}

TEST(Flamegraph, MalformedLinesNameTheLine) {
  EXPECT_EQ(error_of("a;b 1\n\nab\n"), "folded input line 3: expected 'stack count'");
  EXPECT_NE(error_of("a 1\nb x\n").find("folded input line 2: expected 'stack count'"),
            std::string::npos);
  EXPECT_NE(error_of("a -x\n").find("line 1:"), std::string::npos);
  EXPECT_NE(error_of("a 1\r\nb 1.5\r\n").find("line 2:"), std::string::npos);
  EXPECT_NE(error_of("a +3\n").find("line 1:"), std::string::npos);
  EXPECT_NE(error_of("a 1\nb 1\nc 99999999999999999999999\n").find("line 3:"), std::string::npos);
  EXPECT_NE(error_of("a 18446744073709551615\nb 1\n").find("exceeds"), std::string::npos);
  FlamegraphOptions narrow;
  narrow.width = 10;
  EXPECT_THROW(render_flamegraph_svg("a 1\n", narrow), Error);
}

TEST(Flamegraph, LenientWhitespace) {
  // CRLF, tab separator, trailing spaces, several spaces; an empty stack counts for the root.
  auto frames = frames_of(render_flamegraph_svg("a;b\t2\r\na;b   3  \n 5\n", counts()));
  EXPECT_EQ(one(frames, "b").data_w, 5u);
  EXPECT_EQ(one(frames, "all").data_w, 10u);
}

TEST(Flamegraph, EmptyInputSaysNoData) {
  for (const char* in : {"", "\n\n  \n", "a;b 0\n"}) {
    std::string svg = render_flamegraph_svg(in);
    EXPECT_EQ(xml_problem(svg), "") << in;
    EXPECT_NE(svg.find(">no data<"), std::string::npos) << in;
    EXPECT_TRUE(frames_of(svg).empty());
  }
}

TEST(Flamegraph, LargeInputBoundsTheOutput) {
  // 50k distinct stacks: every count lands in the root, and the drawn frames stay bounded
  // by the width, not by the number of lines.
  std::string in;
  uint64_t sum = 0;
  for (int i = 0; i < 50000; ++i) {
    in += "main;loop;f" + std::to_string(i % 7) + ";leaf" + std::to_string(i) + ' ' +
          std::to_string(i % 100 + 1) + '\n';
    sum += i % 100 + 1;
  }
  std::string svg = render_flamegraph_svg(in);
  auto frames = frames_of(svg);
  EXPECT_EQ(one(frames, "all").data_w, sum);
  EXPECT_EQ(named(frames, "f3").size(), 1u);
  EXPECT_LT(frames.size(), 15000u);
  EXPECT_EQ(xml_problem(svg), "");
}

}  // namespace
}  // namespace memsight
