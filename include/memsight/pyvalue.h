#pragma once
// A plain Python value tree (the data subset of pickle): what memsight keeps
// for keys it does not model itself, so that writing a snapshot back loses
// nothing. Also used to print Python reprs.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memsight {

struct PyValue {
  enum class Kind : uint8_t { None, Bool, Int, BigInt, Float, Str, Bytes, List, Tuple, Dict };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  // Str: UTF-8 text. Bytes: raw bytes. BigInt: little-endian two's complement
  // bytes exactly as pickle's LONG1/LONG4 carry them.
  std::string s;
  // List/Tuple: the items. Dict: keys and values alternating.
  std::vector<PyValue> items;

  static PyValue none() { return {}; }
  static PyValue boolean(bool v) {
    PyValue p;
    p.kind = Kind::Bool;
    p.b = v;
    return p;
  }
  static PyValue integer(int64_t v) {
    PyValue p;
    p.kind = Kind::Int;
    p.i = v;
    return p;
  }
  static PyValue real(double v) {
    PyValue p;
    p.kind = Kind::Float;
    p.f = v;
    return p;
  }
  static PyValue str(std::string_view v) {
    PyValue p;
    p.kind = Kind::Str;
    p.s = std::string(v);
    return p;
  }
  static PyValue list(std::vector<PyValue> v = {}) {
    PyValue p;
    p.kind = Kind::List;
    p.items = std::move(v);
    return p;
  }
  static PyValue tuple(std::vector<PyValue> v = {}) {
    PyValue p;
    p.kind = Kind::Tuple;
    p.items = std::move(v);
    return p;
  }
  static PyValue dict() {
    PyValue p;
    p.kind = Kind::Dict;
    return p;
  }

  size_t dict_size() const { return items.size() / 2; }
  // Dict lookup by string key; nullptr when absent or not a dict.
  const PyValue* get(std::string_view key) const;
  void set(std::string_view key, PyValue value);  // appends or replaces
};

// CPython's repr() of the value (dict/list/tuple/str/int/float/bool/None).
std::string py_repr(const PyValue& v);
void py_repr_str(std::string& out, std::string_view utf8);  // repr of a str
std::string py_float_repr(double v);                        // repr of a float
// Decimal text of a BigInt's little-endian two's complement bytes.
std::string bigint_decimal(std::string_view le_bytes);

}  // namespace memsight
