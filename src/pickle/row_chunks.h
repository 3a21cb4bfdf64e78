#pragma once
// Decoding a big trace on several threads (see parallel_decode.cpp for the
// protocol): one share of the trace, decoded in place into the model's
// columns and the memo, with local tables for what is new in the share.
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memsight/snapshot.h"
#include "pickle/source.h"

namespace memsight {

// Tuning and test hooks of the parallel decode.
namespace decode_stats {
// Bytes of trace per share, at least (default 2 MiB); tests make it small
// so that the fixtures are decoded in many shares.
extern std::atomic<size_t> share_bytes;
extern std::atomic<uint64_t> parallel_decodes;  // reads that decoded shares on helper threads
extern std::atomic<uint64_t> restarts;          // reads that had to start again on one thread
}  // namespace decode_stats

namespace row_chunks {

// A reference a share cannot resolve alone: a global id, a local one (new
// in this share), or a pending memo read of a slot in an earlier share.
enum RefKind : uint32_t { kGlobal = 0, kLocal = 1u << 30, kPending = 2u << 30 };
constexpr uint32_t kRefPayload = (1u << 30) - 1;
inline uint32_t ref(RefKind k, uint32_t payload) { return k | payload; }
inline RefKind ref_kind(uint32_t r) { return static_cast<RefKind>(r & ~kRefPayload); }
inline uint32_t ref_payload(uint32_t r) { return r & kRefPayload; }

// What a memo read must turn out to be.
enum Want : uint8_t { kWantStr, kWantStack, kWantFrame };

// A memo slot written by a share before its local ids are known: the
// unpickler's Skipped tag, the kind (a Want) and the local id.
constexpr uint32_t kProvisionalTag = 14;  // Val::Skipped
constexpr uint32_t kLocalIdBits = 26;
inline uint32_t provisional(Want w, uint32_t local) {
  return kProvisionalTag << 28 | uint32_t{w} << kLocalIdBits | local;
}

struct Pending {
  uint32_t idx;  // the memo index read (a slot of an earlier share)
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
};

// What every share may read; set before the shares start, then read-only.
struct Context {
  const ByteSource* src = nullptr;  // the mapped input: pages are given back as shares finish
  const uint8_t* base = nullptr;
  const uint8_t* end = nullptr;
  uint32_t* memo = nullptr;  // the memo: slots below `known` are final, a share writes its own
  uint64_t known = 0;
  std::vector<uint8_t> row_key_of;  // string id -> row field (0xff: none)
  std::vector<Action> action_of;    // string id -> action
  StrId name_key = 0, filename_key = 0, line_key = 0;
  // Key texts, for keys a share spells out instead of reading from the memo.
  std::vector<std::pair<std::string, uint8_t>> row_key_names;
  // The model's columns, sized for every row; a share writes its own rows.
  TraceTable* trace = nullptr;
};

// One share: where it is, where its rows and memo slots go, and what it
// found that the main thread must intern and resolve.
struct Share {
  const uint8_t* start = nullptr;  // its first entry
  const uint8_t* stop = nullptr;   // just past its last op
  uint64_t memo_base = 0;          // its first memo slot
  uint32_t row_base = 0;           // its first row
  uint64_t memos = 0;              // slots and rows the walk counted
  uint64_t rows = 0;
  std::vector<uint64_t> list_slots;  // slots (relative) the main thread filled: device lists

  bool ok = false;
  std::vector<std::string_view> strings;
  std::vector<LocalFrame> frames;
  FrameTable stacks;  // stacks of frame refs (0: empty)
  std::vector<LocalShape> shapes;
  std::vector<Pending> pending;
  std::vector<std::pair<uint32_t, uint32_t>> action_refs;  // (row, string ref): not a known action
};

// Decodes a share in place; sets s.ok when it decoded exactly the rows and
// memo slots the walk counted and ended at s.stop.
void decode_share(Share& s, const Context& ctx);

}  // namespace row_chunks
}  // namespace memsight
