// The streaming JSON reader gives the same values whether the input is
// mapped whole or arrives a byte at a time (every refill path at every
// offset), and reports bad input with its byte offset.
#include "input/json_stream.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "input/source.h"
#include "memsight/error.h"

namespace {

class Trickle : public memsight::ByteSource {
 public:
  Trickle(std::string data, size_t step) : data_(std::move(data)), step_(step) {}
  size_t read(char* dst, size_t n) override {
    size_t k = std::min({n, step_, data_.size() - pos_});
    std::memcpy(dst, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  uint64_t consumed() const override { return pos_; }
  uint64_t total() const override { return data_.size(); }

 private:
  std::string data_;
  size_t step_, pos_ = 0;
};

// Everything the reader sees, as text: keys, strings, numbers, skips.
std::string walk(memsight::ByteSource& src) {
  using memsight::json::Kind;
  memsight::json::Reader r(src);
  std::string out, key, s;
  std::function<void()> value = [&] {
    switch (r.peek()) {
      case Kind::Object:
        r.begin_object();
        out += '{';
        while (r.next_key(key)) {
          out += key + ':';
          if (key == "skip") {
            r.skip();
            out += "<skipped>";
          } else {
            value();
          }
          out += ',';
        }
        out += '}';
        break;
      case Kind::Array:
        r.begin_array();
        out += '[';
        while (r.next_item()) {
          value();
          out += ',';
        }
        out += ']';
        break;
      case Kind::String:
        r.string(s);
        out += '"' + s + '"';
        break;
      case Kind::Number:
        out += std::to_string(r.number());
        break;
      default:
        r.scalar_text(s);
        out += s.empty() ? "null" : s;
    }
  };
  value();
  r.finish();
  return out;
}

const std::string kDoc =
    R"({"traceEvents": [{"name": "a\"b\\c\/d\u00e9\ud83d\ude00\n", "ts": 12.5, "dur": -3e2},)"
    R"( {"skip": {"x": [1, "]}\"{", {"y": "\\"}], "z": "\\\""}, "k": true, "n": null}],)"
    R"( "long": ")" +
    std::string(5000, 'q') + R"(", "e": [], "o": {}})";

TEST(JsonStream, SameValuesWhateverTheChunks) {
  auto whole = memsight::memory_source(kDoc);
  std::string expected = walk(*whole);
  EXPECT_NE(expected.find("\"a\"b\\c/d\xc3\xa9\xf0\x9f\x98\x80\n\""), std::string::npos)
      << expected;
  EXPECT_NE(expected.find("skip:<skipped>,k:true,n:null"), std::string::npos) << expected;
  for (size_t step : {1, 2, 3, 5, 7, 64, 4096}) {
    Trickle t(kDoc, step);
    EXPECT_EQ(walk(t), expected) << "step " << step;
  }
}

TEST(JsonStream, ErrorsNameTheByte) {
  // The same message, at the same byte, a byte at a time and all at once.
  auto err = [](const std::string& doc) {
    std::string msg[2] = {"no error", "no error"};
    for (size_t k = 0; k < 2; ++k) {
      Trickle t(doc, k ? size_t{1} << 20 : 1);
      try {
        walk(t);
      } catch (const memsight::Error& e) {
        msg[k] = e.what();
      }
    }
    return msg[0] == msg[1] ? msg[0] : msg[0] + " / " + msg[1];
  };
  EXPECT_EQ(err("{\"a\": 1"), "truncated JSON at byte 7");
  EXPECT_EQ(err("{\"a\" 1}"), "malformed JSON at byte 5: expected ':'");
  EXPECT_EQ(err("[1, 2] 3"), "malformed JSON at byte 7: unexpected data after the end");
  EXPECT_EQ(err("{\"skip\": [1, \"x\\"), "truncated JSON at byte 15");
  EXPECT_EQ(err("[\"a\x01\"]"), "malformed JSON at byte 3: control character in a string");
  EXPECT_EQ(err("[tru]"), "malformed JSON at byte 1: bad literal");
}

}  // namespace
