// Keys of what values say (value_keys.h).
#include "snapshot/value_keys.h"

#include <cstring>

namespace memsight::write {
namespace {

void append(std::string& key, char tag, const void* p, size_t n) {
  key.push_back(tag);
  key.append(static_cast<const char*>(p), n);
}

}  // namespace

uint32_t ValueKeys::of(const PyValue& v) {
  auto known = by_items_.find(v.items.identity());
  if (known != by_items_.end()) return known->second;
  std::string key(1, static_cast<char>(v.kind));
  key.reserve(1 + 9 * v.items.size());
  for (const PyValue& x : v.items) item(key, x);
  uint32_t id = intern(key);
  by_items_.emplace(v.items.identity(), id);
  return id;
}

// One item: a tag for its kind, then what it holds (a text by its key, a
// container by its key).
void ValueKeys::item(std::string& key, const PyValue& v) {
  using K = PyValue::Kind;
  switch (v.kind) {
    case K::None:
      key.push_back('N');
      break;
    case K::Bool:
      key.push_back(v.b ? 'T' : 'F');
      break;
    case K::Int:
      append(key, 'I', &v.i, sizeof v.i);
      break;
    case K::Float:
      append(key, 'G', &v.f, sizeof v.f);  // by its bits: -0.0 and 0.0 write differently
      break;
    case K::BigInt:
    case K::Str:
    case K::Bytes: {
      uint32_t t = text(v.s);
      append(key, static_cast<char>('a' + static_cast<int>(v.kind)), &t, sizeof t);
      break;
    }
    case K::List:
    case K::Tuple:
    case K::Dict: {
      if (v.items.empty()) {
        key.push_back(static_cast<char>('a' + static_cast<int>(v.kind)));
        break;
      }
      uint32_t c = of(v);
      append(key, 'C', &c, sizeof c);
      break;
    }
  }
}

uint32_t ValueKeys::text(std::string_view s) {
  return texts_.try_emplace(s, static_cast<uint32_t>(texts_.size())).first->second;
}

uint32_t ValueKeys::intern(const std::string& key) {
  return keys_.try_emplace(key, static_cast<uint32_t>(keys_.size())).first->second;
}

}  // namespace memsight::write
