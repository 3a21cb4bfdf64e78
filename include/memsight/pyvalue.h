#pragma once
// A plain Python value tree (the data subset of pickle): what memsight keeps
// for keys it does not model itself, so that writing a snapshot back loses
// nothing. Also used to print Python reprs.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memsight {

struct PyValue;

// The text of a Str, Bytes or BigInt. Copies share one buffer: a string the
// pickle refers to many times through its memo is held once, as Python
// holds it.
class PyText {
 public:
  PyText() = default;
  PyText(std::string s)  // NOLINT: implicit, as a std::string assigns
      : p_(s.empty() ? nullptr : std::make_shared<const std::string>(std::move(s))) {}
  const std::string& str() const { return p_ ? *p_ : no_text(); }
  operator const std::string&() const { return str(); }  // NOLINT
  operator std::string_view() const { return str(); }    // NOLINT
  size_t size() const { return str().size(); }
  bool empty() const { return str().empty(); }
  const char* data() const { return str().data(); }
  std::string::const_iterator begin() const { return str().begin(); }
  std::string::const_iterator end() const { return str().end(); }
  bool operator==(std::string_view o) const { return std::string_view(str()) == o; }
  // The shared buffer (nullptr when empty): the same pointer, the same object.
  const void* identity() const { return p_.get(); }

 private:
  static const std::string& no_text() {
    static const std::string e;
    return e;
  }
  std::shared_ptr<const std::string> p_;
};

// The items of a List, Tuple or Dict. Copies share one vector, so a
// container the pickle refers to many times (through its memo) is held once
// however often, and however deeply, it is referred to; changing a shared
// one copies it first.
class PyItems {
 public:
  PyItems() = default;
  PyItems(std::vector<PyValue> v);  // NOLINT: implicit, as a vector assigns
  PyItems(std::initializer_list<PyValue> v);
  // Defined below PyValue: clang instantiates vector members for an
  // incomplete element type where GCC waits.
  size_t size() const;
  bool empty() const { return size() == 0; }
  const PyValue& operator[](size_t i) const;
  const PyValue* begin() const;
  const PyValue* end() const;
  const PyValue& back() const;
  void reserve(size_t n);
  void push_back(PyValue v);
  // Item i, for changing it (the vector is unshared first).
  PyValue& at_mut(size_t i);
  // An empty vector of its own, whose items come later through fill(): a
  // reader hands out a container before it knows what the container holds.
  static PyItems to_fill();
  // Sets the items of this vector, for every copy that shares it.
  void fill(PyItems&& from);
  // The shared vector (nullptr when empty): the same pointer, the same object.
  const void* identity() const { return p_.get(); }
  // How many values hold this vector: more than one for a shared container.
  long holders() const { return p_.use_count(); }

 private:
  std::vector<PyValue>& mut();
  std::shared_ptr<std::vector<PyValue>> p_;
};

struct PyValue {
  enum class Kind : uint8_t { None, Bool, Int, BigInt, Float, Str, Bytes, List, Tuple, Dict };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  // Str: UTF-8 text. Bytes: raw bytes. BigInt: little-endian two's complement
  // bytes exactly as pickle's LONG1/LONG4 carry them.
  PyText s;
  // List/Tuple: the items. Dict: keys and values alternating.
  PyItems items;

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
    p.s = PyText(std::string(v));
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

inline size_t PyItems::size() const { return p_ ? p_->size() : 0; }
inline const PyValue& PyItems::operator[](size_t i) const { return (*p_)[i]; }
inline const PyValue& PyItems::back() const { return (*p_)[size() - 1]; }
inline void PyItems::reserve(size_t n) { mut().reserve(n); }
inline PyValue& PyItems::at_mut(size_t i) { return mut()[i]; }

inline PyItems::PyItems(std::vector<PyValue> v)
    : p_(v.empty() ? nullptr : std::make_shared<std::vector<PyValue>>(std::move(v))) {}
inline PyItems::PyItems(std::initializer_list<PyValue> v) : PyItems(std::vector<PyValue>(v)) {}
inline const PyValue* PyItems::begin() const { return p_ ? p_->data() : nullptr; }
inline const PyValue* PyItems::end() const { return p_ ? p_->data() + p_->size() : nullptr; }
inline void PyItems::push_back(PyValue v) { mut().push_back(std::move(v)); }
inline PyItems PyItems::to_fill() {
  PyItems p;
  p.p_ = std::make_shared<std::vector<PyValue>>();
  return p;
}
inline void PyItems::fill(PyItems&& from) {
  if (!from.p_)
    p_->clear();
  else if (from.p_.use_count() == 1)
    *p_ = std::move(*from.p_);
  else
    *p_ = *from.p_;
}
inline std::vector<PyValue>& PyItems::mut() {
  if (!p_)
    p_ = std::make_shared<std::vector<PyValue>>();
  else if (p_.use_count() > 1)
    p_ = std::make_shared<std::vector<PyValue>>(*p_);
  return *p_;
}

// CPython's repr() of the value (dict/list/tuple/str/int/float/bool/None).
std::string py_repr(const PyValue& v);
void py_repr_str(std::string& out, std::string_view utf8);  // repr of a str
std::string py_float_repr(double v);                        // repr of a float
// Decimal text of a BigInt's little-endian two's complement bytes.
std::string bigint_decimal(std::string_view le_bytes);

}  // namespace memsight
