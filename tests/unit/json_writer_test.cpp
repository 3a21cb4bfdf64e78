// The JSON writer: escaping, nesting and commas, numbers, closing.
#include "util/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace {

using memsight::JsonWriter;

TEST(JsonWriter, EscapesKeysAndStrings) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("a\"b", "</script>\n\\").field("bad", std::string("\xff")).end_object();
  EXPECT_EQ(out, "{\"a\\\"b\":\"\\u003c/script>\\n\\\\\",\"bad\":\"\\ufffd\"}");
  EXPECT_TRUE(w.complete());
}

TEST(JsonWriter, PutsCommasBetweenItemsAtEveryDepth) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().key("xs").begin_array();
  for (int i = 0; i < 3; ++i) w.value(i);
  w.end_array();
  w.key("empty").begin_object().end_object();
  w.key("nested").begin_array().begin_array().end_array().begin_object().field("k", true);
  w.end_object().null().end_array();
  w.end_object();
  EXPECT_EQ(out, "{\"xs\":[0,1,2],\"empty\":{},\"nested\":[[],{\"k\":true},null]}");
}

TEST(JsonWriter, AppendsToWhatIsThere) {
  std::string out = "x=";
  JsonWriter w(out);
  w.begin_array().value(false).raw("{\"pre\":1}").end_array();
  EXPECT_EQ(out, "x=[false,{\"pre\":1}]");
}

TEST(JsonWriter, DocumentsStartWithTheirSchema) {
  std::string out;
  JsonWriter w(out);
  w.begin_document().field("n", 2).end_object();
  EXPECT_EQ(out, "{\"schema\":" + std::to_string(memsight::kJsonSchema) + ",\"n\":2}");
}

TEST(JsonWriter, WritesIntegersExactly) {
  std::string out;
  JsonWriter w(out);
  w.begin_array()
      .value(std::numeric_limits<int64_t>::min())
      .value(std::numeric_limits<uint64_t>::max())
      .value(static_cast<int8_t>(-5))
      .value(size_t{7})
      .end_array();
  EXPECT_EQ(out, "[-9223372036854775808,18446744073709551615,-5,7]");
}

std::string real(double v) {
  std::string out;
  JsonWriter(out).value(v);
  return out;
}

TEST(JsonWriter, WritesRealsOneWay) {
  EXPECT_EQ(real(3.0), "3");
  EXPECT_EQ(real(-0.0), "-0");
  EXPECT_EQ(real(1e15), "1000000000000000");
  EXPECT_EQ(real(1e16), "10000000000000000");  // past 2^53: %.17g
  EXPECT_EQ(real(0.1), "0.10000000000000001");
  EXPECT_EQ(real(2.5e-7), "2.4999999999999999e-07");
  EXPECT_EQ(real(std::nan("")), "null");
  EXPECT_EQ(real(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(real(-std::numeric_limits<double>::infinity()), "null");
}

TEST(JsonWriter, WritesFixedDecimalsAsPrintfDoes) {
  std::string out;
  JsonWriter w(out);
  w.begin_array().fixed(0.25, 6).fixed(1.0 / 3, 6).fixed(2, 0).fixed(-0.5, 1);
  w.fixed(0.0000004, 6).fixed(std::nan(""), 6).end_array();
  EXPECT_EQ(out, "[0.250000,0.333333,2,-0.5,0.000000,null]");
}

TEST(JsonWriter, WritesShortFixedTimes) {
  std::string out;
  JsonWriter w(out);
  w.begin_array().short_fixed(9, 3).short_fixed(1.5, 3).short_fixed(4421890447690.058, 3);
  w.short_fixed(-0.0001, 3).short_fixed(100, 3).short_fixed(std::nan(""), 3).end_array();
  EXPECT_EQ(out, "[9,1.5,4421890447690.058,0,100,null]");
}

TEST(JsonWriter, ChecksThatWhatOpensIsClosed) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  EXPECT_FALSE(w.complete());
  EXPECT_THROW(w.end_array(), std::logic_error);
  w.end_object();
  EXPECT_TRUE(w.complete());
  EXPECT_THROW(w.end_object(), std::logic_error);
}

}  // namespace
