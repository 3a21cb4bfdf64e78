// util/text_format.h: the one way memsight's text reports write sizes,
// percents, counts and nouns, and torch's size rule kept apart for the text
// tools that must match torch byte for byte.
#include "util/text_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "memsight/text_tools.h"

namespace memsight {
namespace {

constexpr double KiB = 1024.0, GiB = KiB * KiB * KiB;

TEST(TextFormat, SizeUnitChosenAfterRounding) {
  EXPECT_EQ(format_bytes(0), "0.0B");
  EXPECT_EQ(format_bytes(1), "1.0B");
  EXPECT_EQ(format_bytes(1023), "1023.0B");
  EXPECT_EQ(format_bytes(1024), "1.0KiB");
  EXPECT_EQ(format_bytes(1023.9 * KiB), "1023.9KiB");
  // From 1023.95 up the value rounds to 1024.0: it prints as the next unit.
  EXPECT_EQ(format_bytes(1023.95 * KiB), "1.0MiB");
  EXPECT_EQ(format_bytes(1023.96 * GiB), "1.0TiB");
  EXPECT_EQ(format_bytes(1.5 * GiB), "1.5GiB");
}

TEST(TextFormat, TorchRuleKeepsItsBoundary) {
  // torch's _format_size, for the text tools byte-compared with torch.
  EXPECT_EQ(format_size(1023.96 * GiB), "1024.0GiB");
  EXPECT_EQ(format_size(1023.95 * KiB), "1024.0KiB");
  EXPECT_EQ(format_size(1024 * KiB), "1.0MiB");
  EXPECT_EQ(format_size(0), "0.0B");
}

TEST(TextFormat, NegativeSizes) {
  EXPECT_EQ(format_bytes(-2 * GiB), "-2.0GiB");
  EXPECT_EQ(format_bytes(-1023.95 * KiB), "-1.0MiB");
}

TEST(TextFormat, SignedBytes) {
  EXPECT_EQ(signed_bytes(0), "0");
  EXPECT_EQ(signed_bytes(1536), "+1.5KiB");
  EXPECT_EQ(signed_bytes(-1536), "-1.5KiB");
  EXPECT_EQ(signed_bytes(-1048524), "-1023.9KiB");  // 1023.9492 KiB
  EXPECT_EQ(signed_bytes(-1048525), "-1.0MiB");     // 1023.9502 KiB
  EXPECT_EQ(signed_bytes(std::numeric_limits<int64_t>::min()), "-8.0EiB");
}

TEST(TextFormat, Percent) {
  EXPECT_EQ(percent(0.0), "0.0%");
  EXPECT_EQ(percent(1.0), "100.0%");
  EXPECT_EQ(percent(0.1234), "12.3%");
  EXPECT_EQ(percent(0.1236), "12.4%");
  EXPECT_EQ(percent(0.9996), "100.0%");
  // A share that rounds to zero has no sign.
  EXPECT_EQ(percent(-0.0001), "0.0%");
  EXPECT_EQ(percent(1, 4), "25.0%");
  EXPECT_EQ(percent(1, 3), "33.3%");
  EXPECT_EQ(percent(5, 0), "0.0%");
}

TEST(TextFormat, SignedPercentAndPoints) {
  EXPECT_EQ(signed_percent(0.05), "+5.0%");
  EXPECT_EQ(signed_percent(-0.5), "-50.0%");
  EXPECT_EQ(signed_percent(0.00001), "0.0%");
  EXPECT_EQ(percent_points(0), "0");
  EXPECT_EQ(percent_points(0.015), "+1.5 pt");
  EXPECT_EQ(percent_points(-0.2), "-20.0 pt");
  EXPECT_EQ(percent_points(-0.0001), "0.0 pt");
}

TEST(TextFormat, ThousandsSeparators) {
  EXPECT_EQ(count_text(0), "0");
  EXPECT_EQ(count_text(999), "999");
  EXPECT_EQ(count_text(1000), "1,000");
  EXPECT_EQ(count_text(856152), "856,152");
  EXPECT_EQ(count_text(1000000), "1,000,000");
  EXPECT_EQ(count_text(-1234567), "-1,234,567");
  EXPECT_EQ(count_text(std::numeric_limits<int64_t>::min()), "-9,223,372,036,854,775,808");
}

TEST(TextFormat, CountWithNoun) {
  EXPECT_EQ(count_of(0, "block"), "0 blocks");
  EXPECT_EQ(count_of(1, "block"), "1 block");
  EXPECT_EQ(count_of(2, "block"), "2 blocks");
  EXPECT_EQ(count_of(1000, "block"), "1,000 blocks");
  EXPECT_EQ(count_of(1, "trace entry", "trace entries"), "1 trace entry");
  EXPECT_EQ(count_of(2, "trace entry", "trace entries"), "2 trace entries");
}

// The cases the page's scripts are tested on too (viewer/test/format.test.mjs):
// the page prints every value as the text reports do.
TEST(TextFormat, CasesSharedWithThePage) {
  std::ifstream in(MEMSIGHT_TEST_DATA "/text_formats.tsv");
  ASSERT_TRUE(in) << "tests/data/text_formats.tsv";
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t a = line.find('\t'), b = line.find('\t', a + 1);
    ASSERT_NE(b, std::string::npos) << line;
    std::string fn = line.substr(0, a), arg = line.substr(a + 1, b - a - 1),
                want = line.substr(b + 1);
    double v = std::strtod(arg.c_str(), nullptr);
    auto i = static_cast<int64_t>(v);
    std::string got = fn == "bytes"            ? format_bytes(v)
                      : fn == "signed_bytes"   ? signed_bytes(i)
                      : fn == "percent"        ? percent(v)
                      : fn == "signed_percent" ? signed_percent(v)
                      : fn == "percent_points" ? percent_points(v)
                      : fn == "count"          ? count_text(i)
                                               : "unknown function " + fn;
    EXPECT_EQ(got, want) << line;
    ++n;
  }
  EXPECT_GT(n, 30);
}

TEST(TextFormat, ParsesSizes) {
  uint64_t b = 0;
  EXPECT_TRUE(parse_size("80G", b));
  EXPECT_EQ(b, uint64_t{80} << 30);
  EXPECT_TRUE(parse_size("80GiB", b));
  EXPECT_EQ(b, uint64_t{80} << 30);
  EXPECT_TRUE(parse_size("512M", b));
  EXPECT_EQ(b, uint64_t{512} << 20);
  EXPECT_TRUE(parse_size("4096", b));
  EXPECT_EQ(b, 4096u);
  EXPECT_TRUE(parse_size("1k", b));
  EXPECT_EQ(b, 1024u);
  for (const char* bad :
       {"", "0", "0G", "-1G", "+8G", " 8G", "8 G", "8X", "G", "16777216T", "99999999999999999999"})
    EXPECT_FALSE(parse_size(bad, b)) << bad;
}

}  // namespace
}  // namespace memsight
