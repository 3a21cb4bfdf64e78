#pragma once
// What a value says, as a number: equal containers (same kind, same items in
// the same order, however they are shared) get the same key. The writer
// shares through the memo by these keys, not by which values the model
// happens to share: a model read back from the writer's output shares
// otherwise (the reader turns frames lists into interned stacks, frame
// dicts into interned frames, and keeps other lists apart), but says the
// same things, so the writer writes it again byte for byte.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "memsight/pyvalue.h"

namespace memsight::write {

class ValueKeys {
 public:
  // The key of a non-empty list, tuple or dict.
  uint32_t of(const PyValue& v);
  // The key of a sequence of numbers (a stack's frames by their keys).
  uint32_t of_sequence(const std::string& bytes) { return intern(bytes); }

 private:
  void item(std::string& key, const PyValue& v);
  uint32_t text(std::string_view s);
  uint32_t intern(const std::string& key);

  // Known keys, by the shared vector of items (nested references are
  // keyed once, however often they are held).
  std::unordered_map<const void*, uint32_t> by_items_;
  // Texts (views of the model's buffers, which outlive the writer).
  std::unordered_map<std::string_view, uint32_t> texts_;
  std::unordered_map<std::string, uint32_t> keys_;
};

}  // namespace memsight::write
