// Values the model keeps verbatim (unknown keys, top-level values, frames
// of another layout), written as Python's pickler writes them.
#include "snapshot/pickler.h"

namespace memsight::write {

void Pickler::value(const PyValue& v) {
  using K = PyValue::Kind;
  switch (v.kind) {
    case K::None:
      op('N');
      break;
    case K::Bool:
      op(v.b ? 0x88 : 0x89);
      break;
    case K::Int:
      integer(v.i);
      break;
    case K::BigInt:
      if (v.s.size() < 256) {
        op(0x8a);
        op(static_cast<uint8_t>(v.s.size()));
      } else {
        op(0x8b);
        auto n = static_cast<int32_t>(v.s.size());
        raw(&n, 4);
      }
      raw(v.s.data(), v.s.size());
      break;
    case K::Float: {
      op('G');
      uint64_t u;
      std::memcpy(&u, &v.f, 8);
      for (int i = 7; i >= 0; --i) op(static_cast<uint8_t>(u >> (8 * i)));
      break;
    }
    case K::Str: {
      // One text held by many values (a memo read in the file it came
      // from) is written once and read back by reference.
      auto [it, inserted] = text_memo_.try_emplace(v.s.identity(), 0);
      if (!inserted) return memo_get(it->second);
      it->second = str_slot(v.s);
      break;
    }
    case K::Bytes: {
      op('B');
      auto n = static_cast<uint32_t>(v.s.size());
      raw(&n, 4);
      raw(v.s.data(), v.s.size());
      break;
    }
    case K::List: {
      if (shared_seen(v)) break;
      op(']');
      remember_shared(v);
      if (v.items.empty()) break;
      op('(');
      size_t n = 0;
      for (const PyValue& item : v.items) {
        flush_batch(n, 'e');
        value(item);
      }
      op('e');
      break;
    }
    case K::Tuple: {
      if (v.items.empty()) {
        op(')');
        break;
      }
      if (shared_seen(v)) break;
      if (v.items.size() > 3) op('(');
      for (const PyValue& item : v.items) value(item);
      op(v.items.size() == 1   ? 0x85
         : v.items.size() == 2 ? 0x86
         : v.items.size() == 3 ? 0x87
                               : 't');
      remember_shared(v);  // a tuple is memoised once built, as Python does
      break;
    }
    case K::Dict: {
      if (shared_seen(v)) break;
      if (plain_frame(v)) {
        plain_frame_value(v);
        break;
      }
      op('}');
      remember_shared(v);
      if (v.items.empty()) break;
      op('(');
      size_t n = 0;
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        flush_batch(n);
        value(v.items[i]);
        value(v.items[i + 1]);
      }
      op('u');
      break;
    }
  }
}

// A value that is a dict as torch writes a frame ({'name': str,
// 'filename': str, 'line': int}). The reader makes every such dict one
// interned frame, whatever shared it in the file, so it is written by
// what it says, not by which values share it: once, and read back from
// the memo after.
bool Pickler::plain_frame(const PyValue& v) {
  using K = PyValue::Kind;
  const PyItems& it = v.items;
  return v.kind == K::Dict && it.size() == 6 && it[0].kind == K::Str && it[0].s == "name" &&
         it[1].kind == K::Str && it[2].kind == K::Str && it[2].s == "filename" &&
         it[3].kind == K::Str && it[4].kind == K::Str && it[4].s == "line" &&
         it[5].kind == K::Int && it[5].i >= -(int64_t{1} << 59) && it[5].i < (int64_t{1} << 59);
}

void Pickler::plain_frame_value(const PyValue& v) {
  FrameText key{v.items[1].s, v.items[3].s, v.items[5].i};
  auto [it, inserted] = frame_values_.try_emplace(key, 0);
  if (!inserted) {
    memo_get(it->second);
  } else {
    op('}');
    it->second = memoize();
    op('(');
    for (const PyValue& x : v.items) value(x);
    op('u');
  }
}

}  // namespace memsight::write
