#pragma once
// Decoding a big trace on several threads (see parallel_decode.cpp for the
// protocol): one share of the trace, decoded by a helper thread while the
// main thread is still before it, into local tables. The helper does not
// know where the share's memo slots and rows will go, so every memo read it
// cannot resolve alone is kept as pending, and the main thread resolves and
// appends the share when it gets there.
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "input/source.h"
#include "memsight/snapshot.h"

namespace memsight {

// Tuning and test hooks of the parallel decode.
namespace decode_stats {
// Bytes of trace per share, at least (default 2 MiB); tests make it small
// so that the fixtures are decoded in many shares.
extern std::atomic<size_t> share_bytes;
extern std::atomic<uint64_t> parallel_decodes;  // reads that took a share a helper decoded
extern std::atomic<uint64_t> shares_refused;    // shares the main thread decoded again itself
// Shares ended early by an entry their helper does not decode.
extern std::atomic<uint64_t> shares_cut;
}  // namespace decode_stats

namespace row_chunks {

// A reference a share cannot resolve alone: a global id, a local one (new
// in this share), or a pending memo read.
enum RefKind : uint32_t { kGlobal = 0, kLocal = 1u << 30, kPending = 2u << 30 };
constexpr uint32_t kRefPayload = (1u << 30) - 1;
inline uint32_t ref(RefKind k, uint32_t payload) { return k | payload; }
inline RefKind ref_kind(uint32_t r) { return static_cast<RefKind>(r & ~kRefPayload); }
inline uint32_t ref_payload(uint32_t r) { return r & kRefPayload; }

// What a memo slot of a share holds, or what a memo read must turn out to
// be. kWantList: a device's list, made by the main thread from the ops.
enum Want : uint8_t { kWantStr, kWantStack, kWantFrame, kWantRow, kWantList };

// A share's memo slot: the kind and the local id (row, string, ...).
constexpr uint32_t kLocalIdBits = 28;
inline uint32_t slot_code(Want w, uint32_t local) { return uint32_t{w} << kLocalIdBits | local; }
inline Want slot_want(uint32_t code) { return static_cast<Want>(code >> kLocalIdBits); }
inline uint32_t slot_local(uint32_t code) { return code & ((1u << kLocalIdBits) - 1); }

// A memo read of a slot the share did not know when it read it: one the
// main thread stores later, or one of the share's own (the share does not
// know its first slot's number).
struct Pending {
  uint32_t idx;    // the memo index read
  uint32_t slots;  // the share's slots made before the read
  Want want;
};

struct LocalFrame {
  uint32_t name, filename;  // refs
  int64_t line;
};

// A key layout of the share's rows: keys (refs) and row fields.
struct LocalShape {
  uint8_t n = 0;
  uint32_t keys[12];
  uint8_t field[12];
  uint64_t hash() const {
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (uint8_t i = 0; i < n; ++i)
      h = (h ^ (uint64_t{keys[i]} << 8 | field[i])) * 0x100000001b3ull;
    return h;
  }
};

// What every share may read; set before the helpers start, then read-only.
struct Context {
  const ByteSource* src = nullptr;  // the mapped input: pages are given back as shares finish
  const uint8_t* base = nullptr;
  const uint8_t* end = nullptr;
  // The memo's first slots, as they were when the helpers started (protocol
  // 4 writes each slot once, and the main thread checks that none changed).
  std::vector<uint32_t> memo;
  std::vector<uint8_t> row_key_of;  // string id -> row field (0xff: none)
  std::vector<Action> action_of;    // string id -> action
  StrId name_key = 0, filename_key = 0, line_key = 0;
  // Key texts, for keys a share spells out instead of reading from the memo.
  std::vector<std::pair<std::string, uint8_t>> row_key_names;
  std::string entry_key;  // the bytes of an entry's first key: a memo read of "action"
};

// One share: where it is, and what it decoded, for the main thread to
// resolve and append.
struct Share {
  // A frame's first opcode, where the search for the first entry starts,
  // and the next part's (null: the last part).
  const uint8_t* from = nullptr;
  const uint8_t* limit = nullptr;
  // 0 while working, 1 once `start` is known, 2 done, -1 no entry found.
  std::atomic<int> state{0};
  // Its first entry (from state 1), and where it stopped (from state 2): an
  // entry at or past `limit`, or an opcode it does not decode.
  const uint8_t* start = nullptr;
  const uint8_t* stop = nullptr;
  bool cut = false;                 // stopped on an entry it does not decode
  std::atomic<bool> cancel{false};  // the main thread will not take it: stop, or do not start
  // The main thread is done with it (taken, refused or passed by): its
  // helper may reuse its tables for the next share.
  std::atomic<bool> released{false};

  Column<uint32_t> memo;  // its slots, in order (slot_code)
  // The list ops between entries (EMPTY_DICT: an entry, a row), replayed by
  // the main thread on its stack, and the slots its MEMOIZEs made.
  std::vector<uint8_t> ops;
  std::vector<uint32_t> list_slots;
  // Its rows, with refs for ids and indices into `shapes` for layouts.
  TraceTable rows;
  std::vector<std::string_view> strings;
  std::vector<LocalFrame> frames;
  FrameTable stacks;  // stacks of frame refs (0: empty)
  std::vector<LocalShape> shapes;
  IdSlots shape_index;  // of `shapes`: rows whose layouts vary look one up
  Column<Pending> pending;
  std::vector<std::pair<uint32_t, uint32_t>>
      action_refs;  // (local row, string ref): not a known action

  // Takes the tables of a share the main thread is done with, emptied:
  // their memory is paged in already.
  void reuse(Share& done) {
    auto take = [](auto& mine, auto& theirs) {
      std::swap(mine, theirs);
      mine.clear();
    };
    take(memo, done.memo);
    take(ops, done.ops);
    take(list_slots, done.list_slots);
    take(pending, done.pending);
    take(action_refs, done.action_refs);
    std::swap(rows, done.rows);
    rows.resize(0);
  }
};

// Whether q starts a trace entry: EMPTY_DICT MEMOIZE MARK and the action key
// (q has at least 16 readable bytes).
bool is_entry(const uint8_t* q, const Context& ctx);

// A helper's work: its shares in file order. Each share is found (its first
// entry published) and decoded until the next part's first entry, an
// opcode it does not decode, or its cancel; from the third share on, one
// waits until the main thread is done with the share two before, whose
// tables it reuses. Never throws (a failure ends a share where it is).
void decode_shares(const std::vector<Share*>& mine, const Context& ctx);

}  // namespace row_chunks
}  // namespace memsight
