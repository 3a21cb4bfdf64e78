// The standalone viewer's engine formats and reads doubles with the
// fallbacks of util/float_chars.h (its standard library has no
// floating-point <charconv>): they must write and accept what <charconv>
// does, which the native build uses.
#include "util/float_chars.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string_view>
#include <vector>

namespace {

std::vector<double> sample_values() {
  std::vector<double> v = {0.0,
                           -0.0,
                           1.0,
                           -1.0,
                           0.1,
                           0.5,
                           1.5e-7,
                           123456.0,
                           1e15,
                           1e16,
                           1e22,
                           1e-5,
                           1e-4,
                           0.001,
                           9.5,
                           100.0,
                           2.5e-3,
                           1e300,
                           5e-324,
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  for (int e = -1074; e <= 1023; e += 7) v.push_back(std::ldexp(1.0, e));  // powers of two
  std::mt19937_64 rng(22);
  for (int i = 0; i < 3000; ++i) {
    double d = std::bit_cast<double>(rng());
    if (std::isfinite(d)) v.push_back(d);
  }
  for (int i = 0; i < 1000; ++i) v.push_back(static_cast<double>(rng() % 100000000) / 1000.0);
  return v;
}

TEST(FloatChars, FallbacksWriteWhatCharconvWrites) {
  for (double d : sample_values()) {
    EXPECT_EQ(memsight::shortest_scientific_fallback(d), memsight::shortest_scientific(d)) << d;
    EXPECT_EQ(memsight::shortest_text_fallback(d), memsight::shortest_text(d)) << d;
    if (std::fabs(d) < 1e30) {
      for (int prec : {0, 1, 3})
        EXPECT_EQ(memsight::fixed_text_fallback(d, prec), memsight::fixed_text(d, prec)) << d;
    }
  }
  EXPECT_EQ(memsight::shortest_text(1e22), "1e+22");
  EXPECT_EQ(memsight::shortest_text(123456.0), "123456");
  EXPECT_EQ(memsight::shortest_text(0.25), "0.25");
  EXPECT_EQ(memsight::fixed_text(2.25, 1), "2.2");  // round half to even, as printf
}

TEST(FloatChars, FallbackReadsWhatFromCharsReads) {
  const std::string_view cases[] = {
      "0.8",  "1",   "-0.5", "1e3",   "1E-3", ".5",     "5.",     "0",
      "-0",   "inf", "-inf", "1e999", "",     " 1",     "+1",     "1 ",
      "0x10", "1e",  "abc",  "1.2.3", "-",    "1e-400", "2.5e-3", "123456789012345678901234567890"};
  for (std::string_view text : cases) {
    double a = -7, b = -7;
    const bool fallback = memsight::parse_double_fallback(text, a);
    const bool ok = memsight::parse_double(text, b);
    EXPECT_EQ(fallback, ok) << "'" << text << "'";
    if (ok && fallback) {
      EXPECT_EQ(a, b) << "'" << text << "'";
    }
  }
  double v = 0;
  ASSERT_TRUE(memsight::parse_double("0.25", v));
  EXPECT_EQ(v, 0.25);
  EXPECT_FALSE(memsight::parse_double("0x1p3", v));
  EXPECT_FALSE(memsight::parse_double("+1", v));
}

}  // namespace
