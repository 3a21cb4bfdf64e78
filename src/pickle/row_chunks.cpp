// One share of a parallel trace decode (see parallel_decode.cpp for the
// protocol). The walk counted the share's rows and memo slots, so the
// share is decoded in place: rows into the model's columns, memo slots into
// the memo. Strings, frames and stacks new in the share go into local
// tables; refs to them, and memo reads of slots in earlier shares
// (pending), are resolved by the main thread afterwards. Anything this
// decoder does not know fails the share, and the read starts again on one
// thread.
#include "pickle/row_chunks.h"

#include <cstring>
#include <unordered_map>

#include "pickle/opcodes.h"
#include "pickle/trace_walk.h"
#include "pickle/unpickler.h"

namespace memsight {
namespace decode_stats {
std::atomic<size_t> share_bytes{2 << 20};
std::atomic<uint64_t> parallel_decodes{0};
std::atomic<uint64_t> restarts{0};
}  // namespace decode_stats

namespace row_chunks {
using namespace pickle_op;
namespace {

class Decoder {
 public:
  Decoder(Share& s, const Context& ctx) : s_(s), ctx_(ctx), memo_(ctx.memo) {}

  // A MEMOIZE between entries: a device's list, whose slot the main thread
  // filled.
  bool list_slot() {
    if (next_list_ >= s_.list_slots.size() || s_.list_slots[next_list_] != slots_) return false;
    ++next_list_;
    ++slots_;
    return true;
  }
  uint64_t slots() const { return slots_; }
  uint64_t rows() const { return rows_; }

 private:
  Share& s_;
  const Context& ctx_;
  uint32_t* memo_;
  uint64_t slots_ = 0;  // memo slots made so far
  uint64_t rows_ = 0;
  size_t next_list_ = 0;
  const uint8_t* end() const { return ctx_.end; }

  // The next memo slot; false past the count the walk made.
  bool new_slot(uint32_t code) {
    if (slots_ >= s_.memos) return false;
    memo_[s_.memo_base + slots_++] = code;
    return true;
  }

  static void skip_frames(const uint8_t*& q) {
    while (*q == FRAME) q += 9;
  }

  // A memo read at q of the kind `want`: a global id (a slot before the
  // shares), a local one (a slot of this share), or a pending read.
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
    if (idx >= s_.memo_base) {
      if (idx - s_.memo_base >= slots_) return false;  // not stored yet
      uint32_t m = memo_[idx];
      if (m >> 28 != kProvisionalTag || (m >> kLocalIdBits & 3) != want) return false;
      out = ref(kLocal, m & ((1u << kLocalIdBits) - 1));
      return true;
    }
    if (idx >= ctx_.known) {
      if (s_.pending.size() >= kRefPayload) return false;
      s_.pending.push_back({static_cast<uint32_t>(idx), want});
      out = ref(kPending, static_cast<uint32_t>(s_.pending.size() - 1));
      return true;
    }
    uint32_t m = ctx_.memo[idx];
    if (m == UINT32_MAX) return false;  // a wide slot: rare, left to one thread
    auto tag = static_cast<Val::Tag>(m >> 28);
    uint32_t payload = m & ((1u << 28) - 1);
    Val::Tag expect = want == kWantStr     ? Val::Str
                      : want == kWantStack ? Val::StackRef
                                           : Val::FrameRef;
    if (tag != expect) return false;
    out = ref(kGlobal, payload);
    return true;
  }

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
      if (!new_slot(provisional(kWantStr, id))) return false;
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
    uint64_t slot = s_.memo_base + slots_;
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
    memo_[slot] = provisional(kWantFrame, id);
    out = ref(kLocal, id);
    return true;
  }

  // One item of a frame list: a memo read of a frame or a new frame dict.
  bool frame_item(const uint8_t*& q, uint32_t& out) {
    if (*q == EMPTY_DICT) return frame(q, out);
    return memo_read(q, kWantFrame, out);
  }

  // A memo read at q directly followed (frames aside) by APPEND.
  static bool read_then_append(const uint8_t* q) {
    if (*q == BINGET)
      q += 2;
    else if (*q == LONG_BINGET)
      q += 5;
    else
      return false;
    skip_frames(q);
    return *q == APPEND;
  }

  // The frames value: a memo read of a stack, or a new list of frames.
  // New lists are interned once the row is complete (stack_slot_ >= 0).
  bool frames_value(const uint8_t*& q, uint32_t& out) {
    if (*q == BINGET || *q == LONG_BINGET) return memo_read(q, kWantStack, out);
    if (q[0] != EMPTY_LIST || q[1] != MEMOIZE) return false;
    q += 2;
    stack_slot_ = static_cast<int64_t>(s_.memo_base + slots_);
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
  // Decodes the entry whose EMPTY_DICT is at q into its row; q moves past
  // its SETITEMS.
  bool row(const uint8_t*& q) {
    if (q[1] != MEMOIZE || q[2] != MARK) return false;
    q += 3;
    if (rows_ >= s_.rows) return false;
    const uint64_t row = s_.row_base + rows_;
    if (row >= (1u << 28) || !new_slot(static_cast<uint32_t>(uint64_t{Val::Row} << 28 | row)))
      return false;
    stack_slot_ = -1;
    uint32_t action = 0, cc = 0, um = 0, stack = 0;
    int64_t addr = 0, size = 0, stream = 0, time_us = 0;
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
        case kRowAction:
          ok = str_value(q, action);
          break;
        case kRowAddr:
          ok = small_int(q, addr);
          break;
        case kRowSize:
          ok = small_int(q, size);
          break;
        case kRowStream:
          ok = small_int(q, stream);
          break;
        case kRowTimeUs:
          ok = small_int(q, time_us);
          break;
        case kRowCompileContext:
          ok = str_value(q, cc);
          break;
        case kRowUserMetadata:
          ok = str_value(q, um);
          break;
        case kRowFrames:
          ok = frames_value(q, stack);
          break;
        default:
          ok = false;
      }
      if (!ok) return false;
      same_shape = same_shape && s.n < last->n && last->keys[s.n] == k && last->field[s.n] == f;
      s.keys[s.n] = k;
      s.field[s.n++] = f;
    }
    if (s.n == 0) return false;
    if (stack_slot_ >= 0) {
      StackId id = s_.stacks.intern_stack(frame_buf_);
      if (id >= (1u << kLocalIdBits)) return false;
      memo_[stack_slot_] = provisional(kWantStack, id);
      stack = ref(kLocal, id);
    }
    // The layout: usually the previous row's.
    if (!same_shape || s.n != last->n) {
      size_t i = 0;
      while (i < s_.shapes.size() && !same(s_.shapes[i], s)) ++i;
      if (i == s_.shapes.size()) {
        if (i > 65535) return false;
        s_.shapes.push_back(s);
      }
      last_shape_ = i;
    }
    TraceTable& t = *ctx_.trace;
    Action a = Action::Other;
    if (ref_kind(action) == kGlobal && ref_payload(action) < ctx_.action_of.size())
      a = ctx_.action_of[ref_payload(action)];
    if (a == Action::Other) s_.action_refs.emplace_back(static_cast<uint32_t>(row), action);
    t.action[row] = a;
    t.addr[row] = addr;
    t.size[row] = size;
    t.stream[row] = stream;
    t.time_us[row] = time_us;
    t.compile_context[row] = cc;
    t.user_metadata[row] = um;
    t.stack[row] = stack;
    t.shape[row] = static_cast<ShapeId>(last_shape_);
    ++rows_;
    return true;
  }

 private:
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

}  // namespace

void decode_share(Share& s, const Context& ctx) {
  Decoder dec(s, ctx);
  const uint8_t* q = s.start;
  trace_walk::PageDropper dropper(*ctx.src, ctx.base, q);
  s.ok = false;
  while (q < s.stop) {
    if (ctx.end - q < 1024) return;
    dropper.step(q);
    switch (*q) {
      case EMPTY_DICT:
        if (!dec.row(q)) return;
        break;
      case MARK:
      case APPENDS:
      case APPEND:
      case EMPTY_LIST:  // replayed by the main thread from the walk
        ++q;
        break;
      case MEMOIZE:
        if (!dec.list_slot()) return;
        ++q;
        break;
      case FRAME:
        q += 9;
        break;
      default:
        return;
    }
  }
  dropper.all(q);
  s.ok = q == s.stop && dec.rows() == s.rows && dec.slots() == s.memos;
}

}  // namespace row_chunks
}  // namespace memsight
