#include "report/page_json.h"

#include "input/json_stream.h"
#include "input/source.h"
#include "memsight/input_limits.h"
#include "util/escape.h"

namespace memsight::report {

namespace {

// Writes v until `out` reaches `end` bytes; past that, a container gets "…"
// in place of its remaining items and a text is cut (values shared through
// the pickle's memo can nest 2^24 references in 200 bytes). `comma`: 1 when
// the writer puts a comma before v (the budget counts it, as it always has).
void json_value(JsonWriter& w, const PyValue& v, size_t end, size_t comma) {
  using K = PyValue::Kind;
  constexpr std::string_view kCut = "\u2026";
  const std::string& out = w.out();
  auto fit = [&](std::string_view s, size_t comma) -> std::string {
    size_t at = out.size() + comma, room = at < end ? end - at : 0;
    return s.size() <= room ? std::string(s) : cut_name(s, room);
  };
  switch (v.kind) {
    case K::None:
      w.null();
      break;
    case K::Bool:
      w.value(v.b);
      break;
    case K::Int:
      w.value(v.i);
      break;
    case K::BigInt:
      w.value(fit(bigint_decimal(v.s), comma));
      break;
    case K::Float:
      w.value(v.f);
      break;
    case K::Str:
      w.value(fit(v.s, comma));
      break;
    case K::Bytes:
      w.value(fit(py_repr(v), comma));
      break;
    case K::List:
    case K::Tuple:
      w.begin_array();
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (out.size() + (i > 0) >= end) {
          w.value(kCut);
          break;
        }
        json_value(w, v.items[i], end, i > 0);
      }
      w.end_array();
      break;
    case K::Dict:
      w.begin_object();
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        if (out.size() + (i > 0) >= end) {
          w.key(kCut).null();
          break;
        }
        const PyValue& k = v.items[i];
        w.key(fit(k.kind == K::Str ? k.s.str() : py_repr(k), i > 0));
        json_value(w, v.items[i + 1], end, 0);
      }
      w.end_object();
      break;
  }
}

}  // namespace

void pyvalue_json(JsonWriter& w, const PyValue& v, size_t max_bytes) {
  json_value(w, v, w.out().size() + max_bytes, 0);
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

}  // namespace memsight::report
