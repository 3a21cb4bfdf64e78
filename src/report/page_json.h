#pragma once
// The JSON of the page's metadata: numbers as JavaScript reads them, Python
// values from the snapshot, and objects built key by key.
#include <string>
#include <string_view>

#include "memsight/snapshot.h"

namespace memsight::report {

// A finite number, integral ones without a fraction; NaN and infinities as null.
void json_number(std::string& out, double v);
// Python value as JSON (allocator_settings and friends); what JSON lacks
// (big ints, bytes, non-string keys) becomes a string. Past max_bytes of
// JSON, texts are cut and containers end in "…" (allocator settings take a
// few hundred bytes; a hostile file's can nest millions of references).
void pyvalue_json(std::string& out, const PyValue& v, size_t max_bytes = 64 << 10);

// `json` (valid JSON, as memsight writes it) with every string longer than
// `limit` bytes cut by cut_name (memsight/input_limits.h): what a page embeds
// of a report (leaks, ranks) holds no 100 MB name.
std::string cut_json_strings(std::string json, size_t limit);

class JsonObject {
 public:
  JsonObject& num(std::string_view k, double v);
  JsonObject& str(std::string_view k, std::string_view v);
  JsonObject& boolean(std::string_view k, bool v);
  JsonObject& raw(std::string_view k, std::string_view json);
  JsonObject& reserve(size_t n) {
    s_.reserve(n);
    return *this;
  }
  std::string done() {
    s_ += '}';
    return std::move(s_);
  }

 private:
  JsonObject& key(std::string_view k);
  std::string s_ = "{";
};

}  // namespace memsight::report
