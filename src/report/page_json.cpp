#include "report/page_json.h"

#include <cmath>
#include <cstdio>

#include "memsight/input_limits.h"
#include "input/source.h"
#include "input/json_stream.h"
#include "util/escape.h"

namespace memsight::report {

void json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

namespace {

// Writes v until `out` reaches `end` bytes; past that, a container gets "…"
// in place of its remaining items and a text is cut (values shared through
// the pickle's memo can nest 2^24 references in 200 bytes).
void json_value(std::string& out, const PyValue& v, size_t end) {
  using K = PyValue::Kind;
  constexpr std::string_view kCut = "\"\u2026\"";
  auto text = [&](std::string_view s) {
    size_t room = out.size() < end ? end - out.size() : 0;
    if (s.size() <= room)
      append_json_string(out, s);
    else
      append_json_string(out, cut_name(s, room));
  };
  switch (v.kind) {
    case K::None:
      out += "null";
      break;
    case K::Bool:
      out += v.b ? "true" : "false";
      break;
    case K::Int:
      out += std::to_string(v.i);
      break;
    case K::BigInt:
      text(bigint_decimal(v.s));
      break;
    case K::Float:
      json_number(out, v.f);
      break;
    case K::Str:
      text(v.s);
      break;
    case K::Bytes:
      text(py_repr(v));
      break;
    case K::List:
    case K::Tuple:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        if (out.size() >= end) {
          out += kCut;
          break;
        }
        json_value(out, v.items[i], end);
      }
      out += ']';
      break;
    case K::Dict:
      out += '{';
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        if (i) out += ',';
        if (out.size() >= end) {
          out += kCut;
          out += ":null";
          break;
        }
        const PyValue& k = v.items[i];
        text(k.kind == K::Str ? k.s.str() : py_repr(k));
        out += ':';
        json_value(out, v.items[i + 1], end);
      }
      out += '}';
      break;
  }
}

}  // namespace

void pyvalue_json(std::string& out, const PyValue& v, size_t max_bytes) {
  json_value(out, v, out.size() + max_bytes);
}

std::string cut_json_strings(std::string json, size_t limit) {
  std::string out;
  size_t copied = 0;  // json[0, copied) is in out (or nothing was cut yet)
  bool any = false;
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] != '"') continue;
    size_t j = i + 1;
    while (j < json.size() && json[j] != '"') j += json[j] == '\\' ? 2 : 1;
    if (j - i - 1 > limit) {
      // The string's text, by the one JSON reader (escapes and all).
      auto src = memory_source(std::string_view(json).substr(i, j - i + 1));
      json::Reader r(*src);
      std::string text;
      r.string(text);
      if (text.size() > limit) {
        any = true;
        out.append(json, copied, i - copied);
        append_json_string(out, cut_name(text, limit));
        copied = j + 1;
      }
    }
    i = j;
  }
  if (!any) return json;
  out.append(json, copied, std::string::npos);
  return out;
}

JsonObject& JsonObject::key(std::string_view k) {
  if (s_.size() > 1) s_ += ',';
  append_json_string(s_, k);
  s_ += ':';
  return *this;
}

JsonObject& JsonObject::num(std::string_view k, double v) {
  key(k);
  json_number(s_, v);
  return *this;
}

JsonObject& JsonObject::str(std::string_view k, std::string_view v) {
  key(k);
  append_json_string(s_, v);
  return *this;
}

JsonObject& JsonObject::boolean(std::string_view k, bool v) {
  key(k);
  s_ += v ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::raw(std::string_view k, std::string_view json) {
  key(k);
  s_ += json;
  return *this;
}

}  // namespace memsight::report
