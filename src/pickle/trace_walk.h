#pragma once
// Walking a trace without decoding it (see skip.cpp): the flat-dict walker
// shared by the main thread and the helpers, and the helpers themselves.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "input/source.h"
#include "pickle/opcodes.h"
#include "pickle/unpickler.h"

namespace memsight::trace_walk {
using namespace pickle_op;

enum Kind : uint8_t { kScalar, kList, kDict, kTuple };
// Or'ed into a list's or dict's kind: it was stored before the skipped trace
// (skip.cpp), so the trace may not change it.
constexpr uint8_t kShared = 0x80;

inline uint8_t kind_of(Val v) {
  switch (v.tag()) {
    case Val::List:
    case Val::StackRef:
      return kList;
    case Val::Dict:
    case Val::Row:
    case Val::FrameRef:
      return kDict;
    case Val::Tuple:
      return kTuple;
    case Val::Skipped:
      return static_cast<uint8_t>(v.payload());
    default:
      return kScalar;
  }
}

// A flat dict, the usual trace entry or frame, stepped over in one go just
// after its EMPTY_DICT: MEMOIZE MARK, then keys (memo reads or short
// strings) and values (memo reads, ints, floats, constants, short strings,
// and in an entry a list of frames: memo reads or new flat frame dicts),
// then SETITEMS. Returns false for anything else; the caller undoes what
// the memo policy recorded.
//
// Memo policy: slot(kind) for a new container, str(text) for a memoised
// string, ref(index) for a memo read (false: the index is bad).
template <class Memo>
bool walk_flat_dict(const uint8_t*& q0, const uint8_t* end, Memo& memo, bool nested = false) {
  const uint8_t* q = q0;
  if (end - q < 1024 || q[0] != MEMOIZE || q[1] != MARK) return false;
  memo.slot(kDict);
  q += 2;
  // A memo read at q: 1 read, 0 not a memo read, -1 a bad index.
  auto ref = [&]() -> int {
    if (*q == LONG_BINGET) {
      uint32_t idx = load_le<uint32_t>(q + 1);
      q += 5;
      return memo.ref(idx) ? 1 : -1;
    }
    if (*q == BINGET) {
      uint32_t idx = q[1];
      q += 2;
      return memo.ref(idx) ? 1 : -1;
    }
    return 0;
  };
  auto str = [&] {  // a short string at q, memoised with its text
    if (*q != SHORT_BINUNICODE) return false;
    size_t n = q[1];
    std::string_view sv(reinterpret_cast<const char*>(q + 2), n);
    q += 2 + n;
    if (*q == MEMOIZE) {
      ++q;
      memo.str(sv);
    }
    return true;
  };
  // Pickle may close a frame after any whole value: a FRAME op can stand
  // between a key and its value, two items, or the last item and SETITEMS.
  auto frames = [&] {
    while (*q == FRAME) q += 9;
  };
  for (size_t items = 0;; ++items) {
    if (end - q < 600 || items > 64) return false;
    frames();
    if (*q == SETITEMS) {
      q0 = q + 1;
      return true;
    }
    if (int r = ref(); r < 0 || (r == 0 && !str())) return false;  // the key
    frames();
    switch (*q) {  // the value
      case BINGET:
      case LONG_BINGET:
        if (ref() < 0) return false;
        break;
      case SHORT_BINUNICODE:
        str();
        break;
      case BININT1:
        q += 2;
        break;
      case BININT2:
        q += 3;
        break;
      case BININT:
        q += 5;
        break;
      case LONG1:
        q += 2 + size_t{q[1]};
        break;
      case BINFLOAT:
        q += 9;
        break;
      case NONE:
      case NEWTRUE:
      case NEWFALSE:
        q += 1;
        break;
      case EMPTY_LIST: {
        // Frames: nothing, one item and APPEND, or MARK items APPENDS.
        if (nested || q[1] != MEMOIZE) return false;
        q += 2;
        memo.slot(kList);
        auto item = [&]() -> int {  // 1 an item, 0 none here, -1 bad
          frames();
          if (*q == EMPTY_DICT) {
            ++q;
            return walk_flat_dict(q, end, memo, true) ? 1 : -1;
          }
          return ref();
        };
        if (*q == MARK) {
          ++q;
          for (size_t k = 0; frames(), *q != APPENDS; ++k)
            if (end - q < 1024 || k > 4096 || item() != 1) return false;
          ++q;
        } else if (const uint8_t* before = q;
                   *q == EMPTY_DICT || *q == BINGET || *q == LONG_BINGET) {
          if (item() != 1) return false;
          frames();
          if (*q == APPEND) {
            ++q;
          } else if (before[0] == EMPTY_DICT) {
            return false;
          } else {
            q = before;  // that memo read was the next key: the list is empty
          }
        }
        break;
      }
      default:
        return false;
    }
  }
}

// A helper gives back the pages of the mapped input it has read, as the main
// thread does, in steps of 256 KiB: with many threads reading at once,
// bigger steps keep much of the file resident. (Another thread reading one
// of those pages again only faults it back in.)
class PageDropper {
 public:
  PageDropper(const ByteSource& src, const uint8_t* base, const uint8_t* from)
      : src_(src), base_(base), from_(from) {}
  // True when a step's worth was given back.
  bool step(const uint8_t* q) {
    if (q - from_ <= (256 << 10)) return false;
    all(q);
    return true;
  }
  void all(const uint8_t* q) {
    src_.drop(static_cast<uint64_t>(from_ - base_), static_cast<uint64_t>(q - base_));
    from_ = q;
  }

 private:
  const ByteSource& src_;
  const uint8_t* base_;
  const uint8_t* from_;
};

// Bytes an opcode takes, its argument included, for the ops a trace holds
// (0: anything else). q has at least 16 readable bytes.
size_t op_size(const uint8_t* q);

// One helper's share of a parallel walk.
struct Chunk {
  const uint8_t* from = nullptr;  // a frame's first opcode
  std::atomic<const uint8_t*> start{nullptr};
  // 0 running; 1 start published; 2 done; -1 failed.
  std::atomic<int> state{0};
  const uint8_t* stop = nullptr;  // where the walk ended
  uint64_t memos = 0;
  int64_t reach = INT64_MIN;  // max over memo reads of (index - slots counted before it)
  // List operations between entries, in order: MARK, APPENDS, APPEND,
  // EMPTY_LIST (a device's list), MEMOIZE (of that list), EMPTY_DICT (one
  // whole entry).
  std::vector<uint8_t> ops;
  std::vector<uint64_t> memo_ops;  // the chunk's slot of each MEMOIZE in ops
  uint64_t entries() const {
    return static_cast<uint64_t>(std::count(ops.begin(), ops.end(), EMPTY_DICT));
  }
};

struct CountingMemo {
  Chunk& c;
  void slot(uint8_t) { ++c.memos; }
  void str(std::string_view) { ++c.memos; }
  bool ref(uint32_t idx) {
    c.reach = std::max(c.reach, static_cast<int64_t>(idx) - static_cast<int64_t>(c.memos));
    return true;
  }
};

// Helper thread: find the first entry at or after c.from (a dict whose first
// key is the memo read `key`), publish it, then walk entries until the next
// chunk's start (or, for the last chunk, until something that is not part
// of a trace list). `cancel` stops it early.
void walk_chunk(Chunk& c, Chunk* next, const uint8_t* end, std::string_view key,
                const std::atomic<bool>& cancel, const ByteSource& src, const uint8_t* base);

// Helper threads walking shares of a trace: the segments-only read's walk
// (skip.cpp) and the first pass of the parallel decode. Stops and joins
// them when it goes.
class Walkers {
 public:
  Walkers() = default;
  Walkers(const Walkers&) = delete;
  Walkers& operator=(const Walkers&) = delete;
  ~Walkers() { stop(); }
  // Starts up to n - 1 helpers at frame boundaries spread evenly over
  // [from, end), each at least `gap` bytes after the previous one and before
  // the end; `action_slot` is the memo slot of the entries' first key. False,
  // with nothing running, when no boundary fits or no thread can be had.
  bool start(const ByteSource& src, const uint8_t* base, const uint8_t* from, const uint8_t* end,
             uint64_t action_slot, size_t n, size_t gap);
  std::vector<Chunk>& chunks() { return chunks_; }
  bool running() const { return !chunks_.empty(); }
  // Waits for the helpers (each ends by itself), keeping their chunks.
  void join();
  // Cancels and joins the helpers, and drops their chunks.
  void stop();

 private:
  std::string key_;  // the bytes of a memo read of the action slot
  std::vector<Chunk> chunks_;
  std::vector<std::thread> threads_;
  std::atomic<bool> cancel_{false};
};

// First opcodes of the frames of a protocol 4+ pickle: FRAME ops chained
// from the start. Stops at the first gap (an unframed big string). The
// headers are read with peek_at: touching them through the mapping would
// bring in (and count as resident) the pages around every one of them.
std::vector<const uint8_t*> frame_starts(const ByteSource& src, const uint8_t* base,
                                         const uint8_t* end);

}  // namespace memsight::trace_walk
