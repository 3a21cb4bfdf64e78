#include "util/json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "util/escape.h"
#include "util/float_chars.h"

namespace memsight {
namespace {

// The one rule for a real (JsonWriter::value).
void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  // JavaScript reads integers exactly up to 2^53; those print without a
  // fraction, the rest with every digit a double holds.
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

}  // namespace

JsonWriter::~JsonWriter() { assert(complete() || std::uncaught_exceptions() > 0); }

JsonWriter& JsonWriter::open(char c) {
  separate();
  out_ += c;
  open_ += c;
  comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::close(char opened, char c) {
  // A mismatch is a bug in the caller; it costs one compare to catch it in
  // every build, before it becomes a document no reader accepts.
  if (open_.empty() || open_.back() != opened)
    throw std::logic_error(std::string("JsonWriter: '") + c + "' closes nothing open");
  open_.pop_back();
  out_ += c;
  comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  separate();
  append_json_string(out_, k);
  out_ += ':';
  comma_ = false;
  return *this;
}

namespace {

// An integer's exact digits.
template <class Int>
void append_integer(std::string& out, Int v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

JsonWriter& JsonWriter::integer(int64_t v) {
  separate();
  append_integer(out_, v);
  return *this;
}

JsonWriter& JsonWriter::unsigned_integer(uint64_t v) {
  separate();
  append_integer(out_, v);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  separate();
  append_json_number(out_, v);
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  separate();
  append_json_string(out_, s);
  return *this;
}

JsonWriter& JsonWriter::fixed(double v, int decimals) {
  if (!std::isfinite(v)) return null();
  separate();
  out_ += fixed_text(v, decimals);
  return *this;
}

JsonWriter& JsonWriter::short_fixed(double v, int decimals) {
  if (!std::isfinite(v)) return null();
  separate();
  std::string s = fixed_text(v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  out_ += s == "-0" ? "0" : s;
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  separate();
  out_ += json;
  return *this;
}

}  // namespace memsight
