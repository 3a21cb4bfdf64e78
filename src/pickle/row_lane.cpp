// The unpickler's fast paths for trace entries and frames: flat dicts read
// straight from the buffer (try_flat_dict) and the row lane (try_row), which
// decodes the usual trace entry by key into typed fields.
#include <cstring>

#include "pickle/opcodes.h"
#include "pickle/unpickler.h"

namespace memsight {
using namespace pickle_op;

// Fast path. A trace entry or a frame is a flat dict: keys and values are
// memo reads, small ints, short strings and at most lists of memo reads.
// Decode it straight from the buffer into a compact value, with no nodes.
// Anything else, or the buffer running out, abandons the attempt without
// side effects that matter (strings interned, a node's read count bumped)
// and the generic path runs from the same byte.
void Unpickler::flat_get_node(Val& out) {
  Node& n = nodes_[out.idx()];
  if (n.is_converted) {
    out = n.converted;
  } else {
    ++n.gets;
    flat_gets_.push_back(out.idx());
  }
}

bool Unpickler::flat_value(const uint8_t*& q, Val& out) {
  using T = Val::Tag;
  if (end_ - q < 16) [[unlikely]]
    return false;
  uint8_t op = *q++;
  // Memo reads are most of a trace entry: keys, action names, frames.
  if (op == LONG_BINGET) {
    uint64_t idx = load_le<uint32_t>(q);
    q += 4;
    return flat_get(idx, out);
  }
  if (op == BINGET) return flat_get(*q++, out);
  switch (op) {
    case BINGET:
      return flat_get(*q++, out);
    case LONG_BINGET: {
      uint64_t idx = load_le<uint32_t>(q);
      q += 4;
      return flat_get(idx, out);
    }
    case BININT1:
      out = Val::integer(*q++);
      return true;
    case BININT2:
      out = Val::integer(load_le<uint16_t>(q));
      q += 2;
      return true;
    case BININT:
      out = Val::integer(load_le<int32_t>(q));
      q += 4;
      return true;
    case LONG1: {
      size_t n = *q++;
      if (n == 0 || n > 8) return false;
      int64_t v = long1_value(q, n);  // 16 bytes are in the buffer
      q += n;
      if (!Val::fits_int(v)) return false;
      out = Val::integer(v);
      return true;
    }
    case SHORT_BINUNICODE: {
      size_t n = *q++;
      if (static_cast<size_t>(end_ - q) < n + 16) return false;
      std::string_view sv(reinterpret_cast<const char*>(q), n);
      out = Val::make(T::Str, intern_recent(sv));
      q += n;
      if (*q == MEMOIZE) {
        ++q;
        flat_memo_.push_back(out);
      }
      return true;
    }
    case NONE:
      out = Val::make(T::None, 0);
      return true;
    case NEWTRUE:
      out = Val::make(T::True, 0);
      return true;
    case NEWFALSE:
      out = Val::make(T::False, 0);
      return true;
    case EMPTY_LIST: {
      // A list of frames: EMPTY_LIST MEMOIZE, then nothing, one item and
      // APPEND, or MARK items APPENDS.
      if (*q++ != MEMOIZE) return false;
      size_t slot = flat_memo_.size();
      flat_memo_.push_back(Val{});
      flat_frames_.clear();
      Val item;
      if (*q == MARK) {
        ++q;
        while (true) {
          if (end_ - q < 16) return false;
          if (*q == APPENDS) {
            ++q;
            break;
          }
          if (*q != BINGET && *q != LONG_BINGET) return false;
          if (!flat_value(q, item) || item.tag() != T::FrameRef) return false;
          flat_frames_.push_back(item.idx());
        }
      } else if (*q == BINGET || *q == LONG_BINGET) {
        const uint8_t* save = q;
        if (!flat_value(q, item)) return false;
        if (*q == APPEND && item.tag() == T::FrameRef) {
          ++q;
          flat_frames_.push_back(item.idx());
        } else {
          q = save;  // that was the next key: the list is empty
        }
      }
      out = Val::make(T::StackRef, frames_->intern_stack(flat_frames_));
      flat_memo_[slot] = out;
      return true;
    }
    default:
      return false;
  }
}

// Row lane: the common trace entry, decoded by key with no generic values.
// Keys must be known row keys and values of the expected kind; anything
// else returns false with nothing changed, and the flat path takes over.
// A memo read (BINGET or LONG_BINGET) at q; false if q holds something else.
[[gnu::always_inline]] inline bool Unpickler::row_memo_ref(const uint8_t*& q, Val& v) {
  if (*q == LONG_BINGET) {
    uint64_t idx = load_le<uint32_t>(q + 1);
    q += 5;
    return flat_get(idx, v);
  }
  if (*q == BINGET) {
    uint64_t idx = q[1];
    q += 2;
    return flat_get(idx, v);
  }
  return false;
}

[[gnu::always_inline]] inline bool Unpickler::row_str(const uint8_t*& q, StrId& out) {
  Val v;
  if (*q == LONG_BINGET || *q == BINGET) {
    if (!row_memo_ref(q, v)) return false;
  } else if (*q == SHORT_BINUNICODE) {
    size_t n = q[1];
    q += 2;
    if (static_cast<size_t>(end_ - q) < n + 16) return false;
    std::string_view sv(reinterpret_cast<const char*>(q), n);
    v = Val::make(Val::Str, intern_recent(sv));
    q += n;
    if (*q == MEMOIZE) {
      ++q;
      flat_memo_.push_back(v);
    }
  } else {
    return false;
  }
  if (v.tag() != Val::Str) return false;
  out = v.idx();
  return true;
}

// A frame reference inside a frame list: a memo read of a frame.
[[gnu::always_inline]] inline bool Unpickler::row_frame_ref(const uint8_t*& q, FrameId& out) {
  Val v;
  if (!row_memo_ref(q, v) || v.tag() != Val::FrameRef) return false;
  out = v.idx();
  return true;
}

bool Unpickler::row_frames(const uint8_t*& q, StackId& out) {
  if (*q == LONG_BINGET || *q == BINGET) {  // a list seen before
    Val v;
    if (!flat_value(q, v) || v.tag() != Val::StackRef) return false;
    out = v.idx();
    return true;
  }
  // EMPTY_LIST MEMOIZE, then nothing, one frame and APPEND, or MARK frames APPENDS.
  if (q[0] != EMPTY_LIST || q[1] != MEMOIZE) return false;
  q += 2;
  size_t slot = flat_memo_.size();
  flat_memo_.push_back(Val{});
  flat_frames_.clear();
  FrameId f;
  if (*q == MARK) {
    ++q;
    while (*q != APPENDS) {
      if (end_ - q < 16 || !row_frame_ref(q, f)) return false;
      flat_frames_.push_back(f);
    }
    ++q;
  } else if (const uint8_t* save = q;
             (*q == BINGET || *q == LONG_BINGET) && row_frame_ref(q, f) && *q == APPEND) {
    ++q;
    flat_frames_.push_back(f);
  } else {
    q = save;  // the next key follows: the list is empty
  }
  out = frames_->intern_stack(flat_frames_);
  flat_memo_[slot] = Val::make(Val::StackRef, out);
  return true;
}

// A trace field's value, by its kind (trace_fields.h).
template <TraceKind K>
[[gnu::always_inline]] inline bool Unpickler::row_value(const uint8_t*& q, TraceValue<K>& out) {
  if constexpr (K == TraceKind::Int)
    return small_int(q, out);
  else if constexpr (K == TraceKind::Stack)
    return row_frames(q, out);
  else  // Action, Str: a str
    return row_str(q, out);
}

bool Unpickler::try_row() {
  if (!sparse_memo_.empty() || !hook_) return false;
  if (end_ - p_ < 4096 && !eof_) refill(4096, /*hard=*/false);
  const uint8_t* q = p_;
  if (end_ - q < 32 || q[0] != MEMOIZE || q[1] != MARK) return false;
  q += 2;
  flat_memo_.reset();
  flat_gets_.clear();
  // Keys a row may lack must not leak in from an earlier one, whether that
  // one was committed or given up half-way.
  row_.n = 0;
  row_.values = {};
  uint32_t seen = 0;
  auto bail = [&] {
    for (uint32_t id : flat_gets_) --nodes_[id].gets;
    return false;
  };
  while (true) {
    if (end_ - q < 32) return bail();
    if (*q == SETITEMS) {
      ++q;
      break;
    }
    if (row_.n == RowFields::kMax) return bail();
    // Keys repeat byte for byte from one entry to the next (the same memo
    // reads), so each slot remembers its last key's bytes and meaning.
    StrId key;
    uint8_t f;
    KeySlot& ks = key_slots_[row_.n];
    if (!ks.hit(q, key, f)) {  // at least 32 bytes are in the buffer
      const uint8_t* start = q;
      if (!row_str(q, key)) return bail();
      f = key < row_key_of_.size() ? row_key_of_[key] : uint8_t{kRowNone};
      ks.remember(start, q, key, f);
    }
    if (row_.n == 0 && f != kRowAction) return bail();
    if (end_ - q < 32) return bail();
    bool ok;
    switch (f) {
#define MEMSIGHT_ROW_CASE(Name, key, column, Kind)          \
  case kRow##Name:                                          \
    ok = row_value<TraceKind::Kind>(q, row_.values.column); \
    break;
      MEMSIGHT_TRACE_FIELDS(MEMSIGHT_ROW_CASE)
#undef MEMSIGHT_ROW_CASE
      default:
        ok = false;
        break;
    }
    if (!ok) return bail();
    if (seen & (1u << f)) return bail();  // a repeated key: the generic path decides
    seen |= 1u << f;
    row_.keys[row_.n] = key;
    row_.field[row_.n++] = f;
  }
  if (row_.n == 0 || flat_memo_.overflow) return bail();
  Val out = Val::make(Val::Row, hook_->commit_row(row_));
  flat_memo_[0] = out;
  for (Val v : flat_memo_) {
    memo_push(v);
  }
  stack_.push_back(out);
  p_ = q;
  return true;
}

bool Unpickler::try_flat_dict() {
  if (!sparse_memo_.empty()) return false;
  if (end_ - p_ < 4096 && !eof_) refill(4096, /*hard=*/false);
  const uint8_t* q = p_;
  if (end_ - q < 16 || q[0] != MEMOIZE || q[1] != MARK) return false;
  q += 2;
  flat_kv_.clear();
  flat_memo_.reset();  // slot 0: the dict itself
  flat_gets_.clear();
  auto bail = [&] {
    for (uint32_t id : flat_gets_) --nodes_[id].gets;
    return false;
  };
  // Only dicts that start with "action" or "name" take this path.
  Val key;
  const uint8_t* first = q;
  if (!flat_value(q, key) || key.tag() != Val::Str ||
      (key.idx() != action_key_ && key.idx() != name_key_))
    return bail();
  q = first;
  flat_memo_.reset();  // the peek may have memoised the key; it is read again below
  while (true) {
    if (end_ - q < 16) return bail();
    if (*q == SETITEMS) {
      ++q;
      break;
    }
    Val k, v;
    if (!flat_value(q, k) || k.tag() != Val::Str || !flat_value(q, v)) return bail();
    flat_kv_.push_back(k);
    flat_kv_.push_back(v);
  }
  Val out;
  if (flat_kv_.empty() || flat_memo_.overflow || !hook_->convert_dict(*this, flat_kv_, out))
    return bail();
  // Commit: the memo slots this dict created, in order.
  flat_memo_[0] = out;
  for (Val v : flat_memo_) {
    memo_push(v);
  }
  stack_.push_back(out);
  p_ = q;
  return true;
}

}  // namespace memsight
