// One share of a parallel trace decode (see parallel_decode.cpp for the
// protocol), decoded by a helper thread into local tables: its memo slots,
// its rows, and the strings, frames and stacks new in it. The helper does
// not know the number of the share's first memo slot, so a memo read of a
// slot stored after the helpers started is kept as pending, for the main
// thread to resolve. An entry this decoder does not know ends the share
// there: the main thread decodes on from it.
#include "pickle/row_chunks.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "pickle/opcodes.h"
#include "pickle/trace_walk.h"
#include "pickle/unpickler.h"

namespace memsight {
namespace decode_stats {
std::atomic<size_t> share_bytes{2 << 20};
std::atomic<uint64_t> parallel_decodes{0};
std::atomic<uint64_t> shares_refused{0};
std::atomic<uint64_t> shares_cut{0};
}  // namespace decode_stats

namespace row_chunks {
using namespace pickle_op;
namespace {

class Decoder {
 public:
  Decoder(Share& s, const Context& ctx) : s_(s), ctx_(ctx) {}

  // A MEMOIZE between entries: a device's list, made by the main thread.
  bool list_slot() {
    auto slot = static_cast<uint32_t>(s_.memo.size());
    if (!new_slot(slot_code(kWantList, 0))) return false;
    s_.list_slots.push_back(slot);
    s_.ops.push_back(MEMOIZE);
    return true;
  }

 private:
  Share& s_;
  const Context& ctx_;
  const uint8_t* end() const { return ctx_.end; }

  // The next memo slot; false when local ids run out.
  bool new_slot(uint32_t code) {
    if (s_.memo.size() >= (1u << kLocalIdBits)) return false;
    s_.memo.push_back(code);
    return true;
  }

  void skip_frames(const uint8_t*& q) const {
    while (*q == FRAME && frame_fits(q, end())) q += 9;
  }

  // A memo read at q of the kind `want`: a global id (a slot stored before
  // the helpers started) or a pending read (resolved by the main thread).
  bool memo_read(const uint8_t*& q, Want want, uint32_t& out) {
    uint64_t idx;
    if (*q == LONG_BINGET) {
      idx = load_le<uint32_t>(q + 1);
      q += 5;
    } else if (*q == BINGET) {
      idx = q[1];
      q += 2;
    } else {
      return false;
    }
    // A container (a list of frames the main thread has not used as one
    // yet) is known for what it is only when the main thread gets here.
    if (idx >= ctx_.memo.size() || is_container(ctx_.memo[idx])) {
      // Reads of one slot repeat (the same frames, the same action): one
      // pending read serves them while it is remembered.
      PendingCache& c = pending_cache_[(idx ^ want) & (kPendingCache - 1)];
      if (c.idx != idx || c.want != want) {
        if (s_.pending.size() >= kRefPayload) return false;
        c.idx = static_cast<uint32_t>(idx);
        c.want = want;
        c.id = static_cast<uint32_t>(s_.pending.size());
        s_.pending.push_back({c.idx, static_cast<uint32_t>(s_.memo.size()), want});
      }
      out = ref(kPending, c.id);
      return true;
    }
    uint32_t m = ctx_.memo[idx];
    if (m == UINT32_MAX) return false;  // a wide slot: rare, left to the main thread
    if (static_cast<Val::Tag>(m >> 28) != want_tag(want)) return false;
    out = ref(kGlobal, m & ((1u << 28) - 1));
    return true;
  }

  static bool is_container(uint32_t m) {
    auto tag = static_cast<Val::Tag>(m >> 28);
    return tag == Val::List || tag == Val::Tuple || tag == Val::Dict;
  }

  static constexpr size_t kPendingCache = 4096;
  struct PendingCache {
    uint32_t idx = UINT32_MAX, id = 0;
    Want want = kWantStr;
  };
  std::vector<PendingCache> pending_cache_ = std::vector<PendingCache>(kPendingCache);

  uint32_t local_str(std::string_view sv) {
    if (last_str_id_ != UINT32_MAX && sv == last_str_) return last_str_id_;
    auto [it, inserted] = str_index_.emplace(sv, static_cast<uint32_t>(s_.strings.size()));
    if (inserted) s_.strings.push_back(sv);
    last_str_ = sv;
    last_str_id_ = it->second;
    return it->second;
  }

  // A literal string at q (SHORT_BINUNICODE or BINUNICODE), memoised if a
  // MEMOIZE follows; its text in `sv`.
  bool literal(const uint8_t*& q, uint32_t& out, std::string_view& sv) {
    size_t n, head;
    if (*q == SHORT_BINUNICODE) {
      n = q[1];
      head = 2;
    } else if (*q == BINUNICODE) {
      n = load_le<uint32_t>(q + 1);
      head = 5;
    } else {
      return false;
    }
    if (static_cast<size_t>(end() - q) < head + n + 64) return false;
    sv = {reinterpret_cast<const char*>(q + head), n};
    q += head + n;
    uint32_t id = local_str(sv);
    if (id >= (1u << kLocalIdBits)) return false;
    out = ref(kLocal, id);
    if (*q == MEMOIZE) {
      ++q;
      if (!new_slot(slot_code(kWantStr, id))) return false;
    }
    return true;
  }

  bool str_value(const uint8_t*& q, uint32_t& out) {
    if (*q == BINGET || *q == LONG_BINGET) return memo_read(q, kWantStr, out);
    std::string_view sv;
    return literal(q, out, sv);
  }

  // A key: a memo read of a key string known before the helpers started,
  // or a literal. Sets its ref and row field (kRowNone if unknown).
  bool key(const uint8_t*& q, uint32_t& key_ref, uint8_t& field) {
    if (*q == BINGET || *q == LONG_BINGET) {
      const uint8_t* save = q;
      if (!memo_read(q, kWantStr, key_ref)) return false;
      if (ref_kind(key_ref) != kGlobal) {
        q = save;
        return false;  // a key first seen in this share or an earlier one
      }
      StrId id = ref_payload(key_ref);
      field = id < ctx_.row_key_of.size() ? ctx_.row_key_of[id] : uint8_t{kRowNone};
      return true;
    }
    std::string_view sv;
    if (!literal(q, key_ref, sv)) return false;
    field = kRowNone;
    for (auto& [name, f] : ctx_.row_key_names)
      if (name == sv) field = f;
    return true;
  }

  // Whether a key ref is the global or literal key with text `name` / id `id`.
  bool is_key(uint32_t key_ref, StrId id, std::string_view name) const {
    if (ref_kind(key_ref) == kGlobal) return ref_payload(key_ref) == id;
    return s_.strings[ref_payload(key_ref)] == name;
  }

  // A new frame dict at q (EMPTY_DICT): exactly name, filename, line.
  bool frame(const uint8_t*& q, uint32_t& out) {
    if (q[1] != MEMOIZE || q[2] != MARK) return false;
    q += 3;
    size_t slot = s_.memo.size();
    if (!new_slot(0)) return false;
    LocalFrame f{};
    static constexpr std::string_view kNames[3] = {"name", "filename", "line"};
    const StrId ids[3] = {ctx_.name_key, ctx_.filename_key, ctx_.line_key};
    for (int i = 0; i < 3; ++i) {
      skip_frames(q);
      if (end() - q < 64) return false;
      uint32_t k;
      uint8_t unused;
      if (!key(q, k, unused) || !is_key(k, ids[i], kNames[i])) return false;
      skip_frames(q);
      bool ok = i == 0   ? str_value(q, f.name)
                : i == 1 ? str_value(q, f.filename)
                         : small_int(q, f.line);
      if (!ok) return false;
    }
    skip_frames(q);
    if (*q != SETITEMS) return false;
    ++q;
    if (s_.frames.size() >= (1u << kLocalIdBits)) return false;
    auto id = static_cast<uint32_t>(s_.frames.size());
    s_.frames.push_back(f);
    s_.memo[slot] = slot_code(kWantFrame, id);
    out = ref(kLocal, id);
    return true;
  }

  // One item of a frame list: a memo read of a frame or a new frame dict.
  bool frame_item(const uint8_t*& q, uint32_t& out) {
    if (*q == EMPTY_DICT) return frame(q, out);
    return memo_read(q, kWantFrame, out);
  }

  // A memo read at q directly followed (frames aside) by APPEND.
  bool read_then_append(const uint8_t* q) const {
    if (*q == BINGET)
      q += 2;
    else if (*q == LONG_BINGET)
      q += 5;
    else
      return false;
    skip_frames(q);
    return *q == APPEND;
  }

  // A trace field's value, by its kind (trace_fields.h); ids as refs.
  template <TraceKind K>
  [[gnu::always_inline]] bool value(const uint8_t*& q, TraceValue<K>& out) {
    if constexpr (K == TraceKind::Int)
      return small_int(q, out);
    else if constexpr (K == TraceKind::Stack)
      return frames_value(q, out);
    else  // Action, Str: a str
      return str_value(q, out);
  }

  // The frames value: a memo read of a stack, or a new list of frames.
  // New lists are interned once the row is complete (stack_slot_ >= 0).
  bool frames_value(const uint8_t*& q, uint32_t& out) {
    if (*q == BINGET || *q == LONG_BINGET) return memo_read(q, kWantStack, out);
    if (q[0] != EMPTY_LIST || q[1] != MEMOIZE) return false;
    q += 2;
    stack_slot_ = static_cast<int64_t>(s_.memo.size());
    if (!new_slot(0)) return false;
    frame_buf_.clear();
    uint32_t f;
    skip_frames(q);
    if (*q == MARK) {
      ++q;
      for (;;) {
        skip_frames(q);
        if (end() - q < 64 || frame_buf_.size() > 4096) return false;
        if (*q == APPENDS) break;
        if (!frame_item(q, f)) return false;
        frame_buf_.push_back(f);
      }
      ++q;
    } else if (*q == EMPTY_DICT || read_then_append(q)) {
      if (!frame_item(q, f)) return false;
      skip_frames(q);
      if (*q != APPEND) return false;
      ++q;
      frame_buf_.push_back(f);
    }         // else the next key follows: the list is empty
    out = 0;  // set when the row is committed
    return true;
  }

 public:
  // Decodes the entry whose EMPTY_DICT is at q into a row; q moves past
  // its SETITEMS. An entry it cannot decode leaves no trace in the share
  // (the main thread decodes it), and q where it was.
  bool row(const uint8_t*& q) {
    const size_t memo = s_.memo.size(), strings = s_.strings.size(), frames = s_.frames.size(),
                 pending = s_.pending.size();
    const uint8_t* at = q;
    if (row_body(q)) return true;
    q = at;
    s_.memo.resize(memo);
    for (size_t i = strings; i < s_.strings.size(); ++i) str_index_.erase(s_.strings[i]);
    s_.strings.resize(strings);
    last_str_id_ = UINT32_MAX;
    s_.frames.resize(frames);
    if (s_.pending.size() != pending) {
      s_.pending.resize(pending);
      std::fill(pending_cache_.begin(), pending_cache_.end(), PendingCache{});
    }
    return false;
  }

 private:
  bool row_body(const uint8_t*& q) {
    if (q[1] != MEMOIZE || q[2] != MARK) return false;
    q += 3;
    const size_t row = s_.rows.rows();
    if (row >= (1u << kLocalIdBits) || !new_slot(slot_code(kWantRow, static_cast<uint32_t>(row))))
      return false;
    stack_slot_ = -1;
    // Its values; strings and the stack as refs.
    TraceEntry e;
    LocalShape s;
    uint32_t seen = 0;
    // Compared with the previous row's layout as the keys come.
    const LocalShape* last = s_.shapes.empty() ? nullptr : &s_.shapes[last_shape_];
    bool same_shape = last != nullptr;
    for (;;) {
      skip_frames(q);
      if (end() - q < 64) return false;
      if (*q == SETITEMS) {
        ++q;
        break;
      }
      if (s.n == 12) return false;
      uint32_t k;
      uint8_t f;
      KeySlot& ks = key_slots_[s.n];
      if (!ks.hit(q, k, f)) {
        const uint8_t* start = q;
        if (!key(q, k, f)) return false;
        ks.remember(start, q, k, f);
      }
      if (f == kRowNone || (s.n == 0 && f != kRowAction)) return false;
      if (seen & (1u << f)) return false;
      seen |= 1u << f;
      skip_frames(q);
      if (end() - q < 64) return false;
      bool ok;
      switch (f) {
#define MEMSIGHT_ROW_CASE(Name, key, column, Kind) \
  case kRow##Name:                                 \
    ok = value<TraceKind::Kind>(q, e.column);      \
    break;
        MEMSIGHT_TRACE_FIELDS(MEMSIGHT_ROW_CASE)
#undef MEMSIGHT_ROW_CASE
        default:
          ok = false;
      }
      if (!ok) return false;
      same_shape = same_shape && s.n < last->n && last->keys[s.n] == k && last->field[s.n] == f;
      s.keys[s.n] = k;
      s.field[s.n++] = f;
    }
    if (s.n == 0) return false;
    // The layout: usually the previous row's. Nothing fails past the checks
    // here (a stack interned cannot be taken back).
    size_t shape = last_shape_;
    bool new_shape = false;
    if (!same_shape || s.n != last->n) {
      shape = find_shape(s);
      new_shape = shape == s_.shapes.size();
      if (new_shape && shape > 65535) return false;
    }
    if (stack_slot_ >= 0 && s_.stacks.stack_count() >= (1u << kLocalIdBits) - 1) return false;
    if (stack_slot_ >= 0) {
      StackId id = s_.stacks.intern_stack(frame_buf_);
      s_.memo[static_cast<size_t>(stack_slot_)] = slot_code(kWantStack, id);
      e.stack = ref(kLocal, id);
    }
    if (new_shape) {
      s_.shape_index.add(static_cast<uint32_t>(shape), s.hash());
      s_.shapes.push_back(s);
    }
    last_shape_ = shape;
    Action a = Action::Other;
    if (ref_kind(e.action) == kGlobal && ref_payload(e.action) < ctx_.action_of.size())
      a = ctx_.action_of[ref_payload(e.action)];
    if (a == Action::Other) s_.action_refs.emplace_back(static_cast<uint32_t>(row), e.action);
    s_.rows.push_back_row(a, e, static_cast<ShapeId>(shape));
    return true;
  }

 private:
  // The share's layout equal to s, or the number of its layouts: a lookup
  // (rows whose key orders vary looked through every layout of the share).
  size_t find_shape(const LocalShape& s) const {
    uint32_t id = s_.shape_index.find(s.hash(), [&](uint32_t i) { return same(s_.shapes[i], s); });
    return id == IdSlots::kNone ? s_.shapes.size() : id;
  }

  static bool same(const LocalShape& a, const LocalShape& b) {
    return a.n == b.n && std::memcmp(a.keys, b.keys, a.n * sizeof(uint32_t)) == 0 &&
           std::memcmp(a.field, b.field, a.n) == 0;
  }

  KeySlot key_slots_[12];
  std::unordered_map<std::string_view, uint32_t> str_index_;
  std::string_view last_str_;
  uint32_t last_str_id_ = UINT32_MAX;
  std::vector<FrameId> frame_buf_;
  int64_t stack_slot_ = -1;
  size_t last_shape_ = 0;
};

// The first entry at or after `from` (an opcode's start), within 1 MiB: an
// EMPTY_DICT MEMOIZE MARK and the action key.
const uint8_t* first_entry(const uint8_t* q, const Context& ctx) {
  for (const uint8_t* limit = q + (1 << 20); ctx.end - q >= 1024 && q <= limit;) {
    if (is_entry(q, ctx)) return q;
    size_t n = trace_walk::op_size(q);
    if (n == 0) return nullptr;
    q += n;
  }
  return nullptr;
}

void decode_share(Share& s, const Context& ctx) {
  const uint8_t* q = s.cancel.load() ? nullptr : first_entry(s.from, ctx);
  if (!q) {
    s.state.store(-1, std::memory_order_release);
    s.state.notify_all();
    return;
  }
  s.start = s.stop = q;
  s.state.store(1, std::memory_order_release);
  s.state.notify_all();
  try {
    size_t guess = static_cast<size_t>((s.limit ? s.limit : ctx.end) - q) / 64;
    s.rows.reserve(guess);
    s.ops.reserve(guess + guess / 500);
    s.memo.reserve(2 * guess);
    Decoder dec(s, ctx);
    trace_walk::PageDropper dropper(*ctx.src, ctx.base, q);
    for (bool more = true; more && ctx.end - q >= 1024;) {
      switch (*q) {
        case EMPTY_DICT:
          if (s.limit && q >= s.limit && is_entry(q, ctx)) {
            more = false;  // the next share's first entry
          } else if (dec.row(q)) {
            s.ops.push_back(EMPTY_DICT);
            if (dropper.step(q) && s.cancel.load(std::memory_order_relaxed)) more = false;
          } else {
            s.cut = true;
            more = false;
          }
          break;
        case MARK:
        case APPENDS:
        case APPEND:
        case EMPTY_LIST:  // replayed by the main thread
          s.ops.push_back(*q++);
          break;
        case MEMOIZE:
          if (dec.list_slot()) {
            ++q;
          } else {
            more = false;
          }
          break;
        case FRAME:
          if (!frame_fits(q, ctx.end)) {
            more = false;  // the main thread reads it
            break;
          }
          q += 9;
          break;
        default:
          more = false;
      }
    }
    dropper.all(q);
    s.stop = q;
  } catch (...) {  // out of memory: the main thread decodes the share
    s.stop = s.start;
  }
  s.state.store(2, std::memory_order_release);
  s.state.notify_all();
}
}  // namespace

bool is_entry(const uint8_t* q, const Context& ctx) {
  return q[0] == EMPTY_DICT && q[1] == MEMOIZE && q[2] == MARK &&
         std::memcmp(q + 3, ctx.entry_key.data(), ctx.entry_key.size()) == 0;
}

void decode_shares(const std::vector<Share*>& mine, const Context& ctx) {
  // Two shares in hand at most: one decoding while the main thread takes
  // the other.
  for (size_t i = 0; i < mine.size(); ++i) {
    if (i >= 2) {
      Share& done = *mine[i - 2];
      while (!done.released.load(std::memory_order_acquire)) done.released.wait(false);
      mine[i]->reuse(done);
    }
    decode_share(*mine[i], ctx);
  }
}

}  // namespace row_chunks
}  // namespace memsight
