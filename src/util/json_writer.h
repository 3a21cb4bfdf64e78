#pragma once
// The one way memsight writes JSON: a streaming writer that appends to a
// string, escapes text, writes each kind of number one way, puts the commas
// and checks that what it opens is closed.
//
//   std::string out;
//   JsonWriter w(out);
//   w.begin_document().field("entries", n).key("devices").begin_array();
//   ... w.end_array().end_object();          // {"schema":1,"entries":5,"devices":[...]}
//
// Integers are written exactly; a real goes through value(double) (the page's
// rule: integral values without a fraction, others with 17 significant
// digits, NaN and infinities as null) unless a report has always shown it
// with fixed decimals (fixed, short_fixed). Every document starts with
// "schema" (begin_document; docs/formats.md). A mismatched close throws
// std::logic_error in every build: it costs one compare.
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace memsight {

// The version of every JSON document memsight writes: raised when a key is
// removed or changes meaning, never for an added key.
inline constexpr int kJsonSchema = 1;

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}
  // Debug builds check that the document was closed (unless an exception
  // left it half written).
  ~JsonWriter();
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('{', '}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close('[', ']'); }
  // {"schema": kJsonSchema, ... : the start of a document.
  JsonWriter& begin_document() { return begin_object().field("schema", kJsonSchema); }

  // The key of the next value in an object (escaped).
  JsonWriter& key(std::string_view k);

  template <std::integral T>
  requires(!std::same_as<T, bool>) JsonWriter& value(T v) {
    if constexpr (std::is_signed_v<T>)
      return integer(static_cast<int64_t>(v));
    else
      return unsigned_integer(static_cast<uint64_t>(v));
  }
  JsonWriter& value(double v);
  JsonWriter& value(bool v);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  // v with exactly `decimals` digits after the point, as printf's "%.*f"
  // writes it (a ratio a report has always shown so); NaN and infinities as null.
  JsonWriter& fixed(double v, int decimals);
  // The same without the fraction's trailing zeros (and "-0" as "0"): a time
  // as short as it reads ("9", "1.5", "4421890447690.058").
  JsonWriter& short_fixed(double v, int decimals);
  JsonWriter& null();
  // A value that is JSON already (written by a JsonWriter elsewhere).
  JsonWriter& raw(std::string_view json);

  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    return key(k).value(v);
  }
  JsonWriter& fixed_field(std::string_view k, double v, int decimals) {
    return key(k).fixed(v, decimals);
  }
  JsonWriter& raw_field(std::string_view k, std::string_view json) { return key(k).raw(json); }

  // The string written to (to reserve room or measure what was written).
  std::string& out() { return out_; }
  // True when every container opened was closed.
  bool complete() const { return open_.empty(); }

 private:
  JsonWriter& open(char c);
  JsonWriter& close(char opened, char c);
  JsonWriter& integer(int64_t v);
  JsonWriter& unsigned_integer(uint64_t v);
  // A comma before any value but the first of its container (a key counts
  // as its value's start).
  void separate() {
    if (comma_) out_ += ',';
    comma_ = true;
  }

  std::string& out_;
  std::string open_;  // the containers open, innermost last: '{' or '['
  bool comma_ = false;
};

}  // namespace memsight
