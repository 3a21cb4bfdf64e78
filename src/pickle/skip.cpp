// Skipping. A read for stats, segments, memory or compare never looks at the
// trace, so its list is walked instead of decoded: every opcode is checked
// (known, allowed, its length within the input), the kinds of the values on
// a private stack are tracked so that APPENDS and SETITEMS have a list or a
// dict to act on, and memo slots are numbered and given placeholders. Any
// doubt throws NeedsFullRead, and the caller reads in full.
//
// A big trace in a framed (protocol 4+) pickle is walked by several threads.
// Frames start on opcode boundaries, so a helper can start at a frame, find
// the first trace entry after it, and walk entries from there. It cannot
// know how many memo slots came before it, so it counts its own and notes,
// for every memo read, how far past its own count the index reaches; the
// main thread, walking the start of the trace itself, checks those once
// the counts are known, replays the helpers' list operations on its stack
// of kinds, and accepts the result only if each helper's walk began exactly
// where the previous walk ended.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <thread>

#include "pickle/opcodes.h"
#include "pickle/trace_walk.h"
#include "pickle/unpickler.h"
#include "util/parallel.h"

namespace memsight {
using namespace pickle_op;

namespace skip_stats {
std::atomic<uint64_t> parallel_walks{0};
}  // namespace skip_stats

// The list about to be read is the value of `key` in the root dict's
// (only) batch of items: [dict, MARK, key, value, ..., key].
bool Unpickler::at_value_of(StrId key) const {
  return sparse_memo_.empty() && marks_.size() == 1 && marks_[0] == 1 && stack_.size() >= 2 &&
         stack_[0].tag() == Val::Dict && (stack_.size() - 1) % 2 == 1 &&
         stack_.back() == Val::make(Val::Str, key);
}

uint64_t Unpickler::action_slot() const {
  if (!action_key_) return UINT64_MAX;
  uint64_t slot = UINT64_MAX;
  for (size_t i = memo_.size(); i-- > 0 && memo_.size() - i < (1u << 20);)
    if (memo_at(i) == Val::make(Val::Str, action_key_)) slot = i;
  return slot;
}

using namespace trace_walk;

void Unpickler::skip_list() {
  // Batches of 1000 items (as pickle writes lists) sit on the stack at once.
  constexpr size_t kMaxDepth = size_t{1} << 16;
  std::vector<uint8_t> kinds_buf(kMaxDepth);  // kinds of the values this list pushed
  std::vector<uint32_t> marks_buf(kMaxDepth);
  uint8_t* kinds = kinds_buf.data();
  uint32_t* marks = marks_buf.data();
  size_t depth = 0, nmarks = 0;
  kinds[depth++] = kList;
  const uint8_t* q = p_;
  const uint8_t* str_end = nullptr;  // just past the last string's bytes
  size_t str_len = 0;
  auto fail = [] { throw NeedsFullRead{}; };
  auto push = [&](uint8_t k) {
    if (depth == kMaxDepth) fail();
    kinds[depth++] = k;
  };
  auto pop_to_mark = [&]() -> size_t {
    if (nmarks == 0) fail();
    return marks[--nmarks];
  };
  // A list or dict stored before the trace may be shared with what the read
  // keeps (a block's frames): if the trace changed it, only a full read would
  // see that. Such a value is marked, so that no list operation takes it as
  // its target and none accepts it as an item.
  const size_t before_trace = memo_.size();
  auto get = [&](uint64_t idx) {
    if (idx >= memo_.size()) fail();
    uint8_t k = kind_of(memo_at(idx));
    if (idx < before_trace && (k == kList || k == kDict)) k |= kShared;
    push(k);
  };
  // What a full read would refuse must not pass here either, whatever the
  // protocol: the trace holds lists (one per device) and those hold dicts.
  // `target` is the list receiving kinds[from..depth); its own parent is
  // the item below the innermost open mark, or the item just below it.
  auto check_items = [&](size_t target, size_t from) {
    uint8_t want;
    if (target == 0) {
      want = kList;
    } else {
      size_t parent = nmarks && marks[nmarks - 1] <= target ? marks[nmarks - 1] - 1 : target - 1;
      if (parent != 0) return;  // deeper than an entry list: not the reader's concern here
      want = kDict;
    }
    for (size_t i = from; i < depth; ++i)
      if (kinds[i] != want) fail();
  };
  // The list operations of a trace, on the stack of kinds (also replayed
  // for what helper threads walked).
  auto list_op = [&](uint8_t op) {
    switch (op) {
      case MARK:
        if (nmarks == kMaxDepth) fail();
        marks[nmarks++] = static_cast<uint32_t>(depth);
        break;
      case APPEND:
        if (depth < 2 || kinds[depth - 2] != kList || (nmarks && marks[nmarks - 1] > depth - 2))
          fail();
        check_items(depth - 2, depth - 1);
        --depth;
        break;
      case APPENDS: {
        size_t from = pop_to_mark();
        if (from == 0 || kinds[from - 1] != kList) fail();
        check_items(from - 1, from);
        depth = from;
        break;
      }
      case EMPTY_DICT:
        push(kDict);
        break;
      case EMPTY_LIST:
        push(kList);
        break;
      case MEMOIZE:  // a helper's (the slot is counted in its memos)
        if (depth == 0 || (nmarks && marks[nmarks - 1] >= depth)) fail();
        break;
      default:
        fail();
    }
  };
  struct SeqMemo {
    Unpickler& vm;
    void slot(uint8_t kind) { vm.memo_push(Val::make(Val::Skipped, kind)); }
    void str(std::string_view sv) {
      StrId id;
      try {
        id = vm.intern_recent(sv);
      } catch (const Error&) {
        throw NeedsFullRead{};  // a bad string: the full read gives the error
      }
      vm.memo_push(Val::make(Val::Str, id));
    }
    bool ref(uint32_t idx) const { return idx < vm.memo_.size(); }
  } seq{*this};

  // Helpers for a big framed trace (mapped input only).
  Walkers walkers;
  std::vector<Chunk>& chunks = walkers.chunks();
  const uint8_t* launch_at = buf_.empty() && eof_ ? q + (256 << 10) : nullptr;
  auto launch = [&] {
    launch_at = nullptr;
    uint64_t slot = action_slot();  // the entries' first key is a memo read by now
    size_t n = std::min<size_t>({threads_allowed(), static_cast<size_t>(end_ - q) / (4 << 20), 16});
    if (slot != UINT64_MAX && n >= 2) walkers.start(src_, base_, q, end_, slot, n, 1 << 20);
  };
  // At the first helper's start: take over what the helpers walked.
  auto join_helpers = [&] {
    walkers.join();
    uint64_t base = memo_.size();
    for (Chunk& c : chunks) {
      if (c.state.load() != 2) fail();
      if (c.reach >= static_cast<int64_t>(base)) fail();  // a read of a slot not yet stored
      for (uint8_t op : c.ops) list_op(op);
      base += c.memos;
    }
    memo_.resize(base, static_cast<uint32_t>(uint64_t{Val::Skipped} << 28 | kScalar));
    const uint8_t* stop = chunks.back().stop;
    src_.drop(static_cast<uint64_t>(q - base_), static_cast<uint64_t>(stop - base_));
    chunks.clear();
    ++skip_stats::parallel_walks;
    return stop;
  };

  for (;;) {
    if (end_ - q < 16 && !eof_) {
      p_ = q;
      refill(16, /*hard=*/false);
      q = p_;
      str_end = nullptr;  // the buffer moved
    }
    if (q >= next_release_) {
      p_ = q;
      release_consumed();
    }
    if (launch_at && q >= launch_at) launch();
    if (!chunks.empty() && q >= chunks[0].from) {
      int s;
      while ((s = chunks[0].state.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
      const uint8_t* start = chunks[0].start.load(std::memory_order_acquire);
      if (s < 0 || q > start) fail();
      if (q == start) {
        q = join_helpers();
        continue;
      }
    }
    auto left = [&] { return static_cast<size_t>(end_ - q); };
    if (left() == 0) fail();
    uint8_t op = *q;
    if (depth == 1 && nmarks == 0 && op != MEMOIZE && op != MARK && op != FRAME && op != EMPTY_LIST)
      break;  // the list is complete: the root dict's next key (or SETITEMS) follows
    ++q;
    // Bytes the opcode's argument needs beyond the opcode.
    auto need = [&](size_t n) {
      if (left() < n) {
        if (eof_) fail();
        p_ = q;
        refill(n, /*hard=*/false);
        q = p_;
        str_end = nullptr;
        if (left() < n) fail();
      }
    };
    switch (op) {
      case MEMOIZE: {
        // pickle.loads refuses a store below the last mark: the full read says so.
        if (depth == 0 || (nmarks && marks[nmarks - 1] >= depth)) fail();
        // Strings keep their value: the keys of later values (allocator
        // settings, annotations) are often memo reads of trace keys.
        Val v = Val::make(Val::Skipped, kinds[depth - 1]);
        if (q - 1 == str_end) {
          try {
            v = Val::make(Val::Str, intern_recent({reinterpret_cast<const char*>(str_end - str_len),
                                                   str_len}));
          } catch (const Error&) {
            fail();  // a bad string: the full read gives the error, where it is
          }
        }
        memo_push(v);
        break;
      }
      case BINGET:
        need(1);
        get(*q++);
        break;
      case LONG_BINGET:
        need(4);
        get(load_le<uint32_t>(q));
        q += 4;
        break;
      case FRAME: {
        need(8);
        // As the main loop: the furthest frame end, checked at STOP.
        const uint64_t at = buf_offset_ + static_cast<uint64_t>(q - base_) + 8;
        const uint64_t n = load_le<uint64_t>(q);
        frame_end_ = std::max(frame_end_, n > UINT64_MAX - at ? UINT64_MAX : at + n);
        q += 8;
        break;
      }
      case EMPTY_DICT: {
        size_t mark = memo_.size();
        if (!walk_flat_dict(q, end_, seq)) memo_.resize(mark);
        push(kDict);
        break;
      }
      case EMPTY_TUPLE:
        push(kTuple);
        break;
      case NONE:
      case NEWTRUE:
      case NEWFALSE:
      case BININT1:
      case BININT2:
      case BININT:
      case BINFLOAT: {
        size_t n = op_size(q - 1) - 1;  // fixed: reads only the opcode
        need(n);
        q += n;
        push(kScalar);
        break;
      }
      case LONG1:
      case SHORT_BINUNICODE:
      case SHORT_BINBYTES:
        need(1);
        str_len = *q;
        need(1 + str_len);
        q += 1 + str_len;
        if (op == SHORT_BINUNICODE) str_end = q;
        push(kScalar);
        break;
      case LONG4:
      case BINUNICODE:
      case BINBYTES: {
        need(4);
        int64_t n = load_le<int32_t>(q);
        if (op != LONG4) n = load_le<uint32_t>(q);
        if (n < 0 || n > (int64_t{1} << 31)) fail();
        need(4 + static_cast<size_t>(n));
        q += 4 + n;
        str_len = static_cast<size_t>(n);
        if (op == BINUNICODE) str_end = q;
        push(kScalar);
        break;
      }
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        size_t k = static_cast<size_t>(op - TUPLE1 + 1);
        if (depth <= k || (nmarks && marks[nmarks - 1] > depth - k)) fail();
        depth -= k;
        push(kTuple);
        break;
      }
      case TUPLE:
      case LIST:
      case DICT: {
        size_t from = pop_to_mark();
        if (op == DICT && (depth - from) % 2) fail();
        depth = from;
        push(op == TUPLE ? kTuple : op == LIST ? kList : kDict);
        break;
      }
      case MARK:
      case APPEND:
      case APPENDS:
      case EMPTY_LIST:
        list_op(op);
        break;
      case SETITEM:
        if (depth < 3 || kinds[depth - 3] != kDict || (nmarks && marks[nmarks - 1] > depth - 3))
          fail();
        depth -= 2;
        break;
      case SETITEMS: {
        size_t from = pop_to_mark();
        if (from == 0 || kinds[from - 1] != kDict || (depth - from) % 2) fail();
        depth = from;
        break;
      }
      default:
        fail();  // rare or refused opcodes: the full read deals with them
    }
  }
  p_ = q;
  stack_.push_back(Val::make(Val::Skipped, kList));
  skipped_ = true;
}

}  // namespace memsight
