// JSON string escaping of text that is not UTF-8.
#include "util/escape.h"

#include <gtest/gtest.h>

#include <string>

namespace {

std::string json(std::string_view s) {
  std::string out;
  memsight::append_json_string(out, s);
  return out;
}

TEST(JsonString, ValidUtf8PassesThrough) {
  EXPECT_EQ(json("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"),
            "\"a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"");
  EXPECT_EQ(json("<\"\\\n\x01"), "\"\\u003c\\\"\\\\\\n\\u0001\"");
}

TEST(JsonString, LoneSurrogateBecomesItsEscape) {
  // Python's pickle writes "f\udc80" as f ED B2 80.
  EXPECT_EQ(json("f\xed\xb2\x80g"), "\"f\\udc80g\"");
  EXPECT_EQ(json("\xed\xa0\x80"), "\"\\ud800\"");
}

TEST(JsonString, OtherBadBytesBecomeReplacementCharacters) {
  EXPECT_EQ(json("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(json("\xc3"), "\"\\ufffd\"");                                   // truncated
  EXPECT_EQ(json("\xc0\xaf"), "\"\\ufffd\\ufffd\"");                        // overlong
  EXPECT_EQ(json("\xe4\xb8x"), "\"\\ufffd\\ufffdx\"");                      // bad continuation
  EXPECT_EQ(json("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // past U+10FFFF
}

}  // namespace
