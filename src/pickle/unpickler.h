#pragma once
// A restricted pickle virtual machine for the data subset of protocols 2-5.
//
// It never imports or calls anything: GLOBAL, REDUCE, BUILD and the other
// code-running opcodes are refused with an Error naming the opcode and byte
// offset. Values are 8-byte tagged words; containers live in a node pool.
//
// To keep memory flat on huge inputs, a DictHook may turn a dict into a
// compact value (a trace row, a frame) the moment its items arrive; the
// dict's node is then recycled and its memo slot rewritten, so a later
// BINGET sees the compact value.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "input/source.h"
#include "memsight/error.h"
#include "memsight/io.h"
#include "memsight/pyvalue.h"
#include "memsight/snapshot.h"
#include "pickle/opcodes.h"
#include "pickle/row_chunks.h"

namespace memsight {

struct Val {
  enum Tag : uint64_t {
    None = 0,
    False,
    True,
    Int,
    Big,
    Float,
    Str,
    Bytes,
    List,
    Tuple,
    Dict,
    FrameRef,
    StackRef,
    Row,
    // A value inside a skipped region (see Unpickler::skip_value_of); the
    // payload is its kind as the skipper tracks it.
    Skipped
  };
  uint64_t bits = 0;

  static constexpr uint64_t kPayload = (uint64_t{1} << 60) - 1;
  static Val make(Tag t, uint64_t payload) {
    return Val{(uint64_t{t} << 60) | (payload & kPayload)};
  }
  static bool fits_int(int64_t v) { return v >= -(int64_t{1} << 59) && v < (int64_t{1} << 59); }
  static Val integer(int64_t v) { return make(Int, static_cast<uint64_t>(v)); }
  Tag tag() const { return static_cast<Tag>(bits >> 60); }
  uint64_t payload() const { return bits & kPayload; }
  uint32_t idx() const { return static_cast<uint32_t>(bits & kPayload); }
  int64_t as_int() const {  // sign-extend the 60-bit payload
    return static_cast<int64_t>(bits << 4) >> 4;
  }
  bool is_node() const { return tag() == List || tag() == Tuple || tag() == Dict; }
  bool operator==(const Val& o) const { return bits == o.bits; }
};

// The value a share's memo slot or pending read of kind `w` holds (not a
// device's list) (row_chunks.h).
inline Val::Tag want_tag(row_chunks::Want w) {
  using namespace row_chunks;
  return w == kWantStr     ? Val::Str
         : w == kWantStack ? Val::StackRef
         : w == kWantFrame ? Val::FrameRef
                           : Val::Row;
}

struct Node {
  std::vector<Val> items;  // dict: key, value, key, value ...
  // A list of consecutive trace rows is kept as a range, not as items: the
  // device traces of a big snapshot would otherwise cost 8 bytes an entry.
  uint32_t row_first = 0, row_count = 0;
  uint32_t memo = UINT32_MAX;  // memo slot holding this node, if any
  uint32_t gets = 0;           // memo reads of it (0: the stack holds the only reference)
  Val converted;               // set when the node was turned into a compact value
  bool is_converted = false;
};

class Unpickler;
namespace trace_walk {
struct Chunk;
}

// How many walks of a big skipped trace have used helper threads (a test
// hook; threads_allowed() in util/parallel.h says how many a read may use).
namespace skip_stats {
extern std::atomic<uint64_t> parallel_walks;
}  // namespace skip_stats

// Thrown when a read that skips part of the input (ReadScope::SegmentsOnly)
// meets something it cannot vouch for without decoding it: a value from the
// skipped part used afterwards, an unusual layout, or bytes that may be
// corrupt. The caller reads the whole input again, in full, and that read
// gives the answer, or the error, for the input as it is.
struct NeedsFullRead {};

// Thrown when a read that converts values as they stream in (a trace entry
// into a row, a frame dict into a frame, a frames list into a stack) meets a
// change to a container that may already have been used: a list or dict
// changed after a memo read of it, or one already converted. pickle.loads
// shows the change to every holder; a conversion made earlier would not.
// Python's pickler never writes such a change (it fills each container
// before any memo read of it), so real snapshots never see this: the caller
// reads the input again with no conversion until the pickle has ended.
struct NeedsExactRead {};

// A trace entry decoded by the row lane: its keys in order, what each is,
// and the values.
struct RowFields {
  static constexpr int kMax = 12;
  int n = 0;
  StrId keys[kMax];
  uint8_t field[kMax];  // RowKey
  TraceEntry values;
};

class DictHook {
 public:
  virtual ~DictHook() = default;
  // Called when an empty dict receives its first batch of items. Return true
  // and set `out` to replace the dict with a compact value.
  virtual bool convert_dict(Unpickler& vm, std::span<const Val> items, Val& out) = 0;
  // Stores a row decoded by the row lane; returns its row index.
  virtual uint32_t commit_row(const RowFields& row) = 0;
  // For the parallel decode, which fills the rows in place: the table,
  // the shape id of a row layout, and a row's action from its string.
  virtual TraceTable* trace_table() { return nullptr; }
  virtual ShapeId row_shape(const RowFields& row) = 0;
  virtual void set_row_action(uint32_t row, StrId action) = 0;
};

// The keys the row lane understands: the model's trace fields, in the
// order of its table (trace_fields.h).
enum RowKey : uint8_t {
#define MEMSIGHT_ROW_KEY(Name, key, column, Kind) kRow##Name,
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_ROW_KEY)
#undef MEMSIGHT_ROW_KEY
      kRowKeyCount,
  kRowNone = 0xff
};
static_assert(kRowKeyCount == kTraceFieldCount && kRowKeyCount <= 32);  // a bit each in a mask

class Unpickler {
 public:
  Unpickler(ByteSource& src, StringTable& strings, DictHook* hook, Progress progress = {});
  // Runs to STOP and returns the result. Throws Error.
  Val run();
  // Expected number of memo entries, to size tables up front.
  void reserve_memo(size_t n) { memo_.reserve(n); }
  // The value of the top-level key `key` (a list) is walked, checked opcode
  // by opcode, and replaced by a Skipped value instead of being decoded.
  void skip_value_of(StrId key) { skip_key_ = key; }
  bool skipped() const { return skipped_; }
  // The value of the top-level key `key` (the trace), when big, is decoded
  // by several threads (see parallel_decode.cpp). The other two are the ids
  // of the frame keys "filename" and "line".
  void decode_in_parallel(StrId key, StrId filename_key, StrId line_key) {
    par_key_ = key;
    filename_key_ = filename_key;
    line_key_ = line_key;
  }
  // The items of a list, with a row range expanded.
  std::vector<Val> list_items(Val v) const;

  // Access for hooks and converters.
  Node& node(Val v) { return nodes_[v.idx()]; }
  const Node& node(Val v) const { return nodes_[v.idx()]; }
  // Follows a node that was converted in place.
  Val resolve(Val v) const {
    if (v.is_node() && nodes_[v.idx()].is_converted) return nodes_[v.idx()].converted;
    return v;
  }
  // Replaces a container by a compact value everywhere the VM can see it:
  // its memo slot, and the node itself (for holders that still point at it).
  // Frees the node when nothing else can refer to it.
  void convert_node(Val container, Val compact);
  double float_at(Val v) const { return floats_[v.idx()]; }
  const std::string& bytes_at(Val v) const { return blobs_[v.idx()]; }
  const std::string& big_at(Val v) const { return blobs_[v.idx()]; }
  uint64_t offset() const;  // byte offset of the next unread byte
  // Counts changes to containers that were read through the memo (and so
  // may be held elsewhere too): a copy of one made before the count moved
  // may be out of date. With a hook, such a change ends the read instead
  // (NeedsExactRead), so only a read without one counts any.
  uint64_t shared_changes() const { return shared_changes_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  void refill(size_t need, bool hard = true);
  void need(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) refill(n);
  }
  uint32_t new_node(Val::Tag tag);
  size_t pop_mark();
  // The stack's lowest index an opcode may take values from: the last open
  // MARK. pickle.loads refuses to pop below it ("unpickling stack
  // underflow"), so a value below a mark is never consumed here either.
  size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  [[noreturn]] void underflow(const char* op) const;
  void push_long(const uint8_t* bytes, size_t n);
  void memo_put(uint64_t idx);
  Val memo_get(uint64_t idx);
  void set_items(size_t from);  // SETITEM(S) / DICT helper
  void shared_change();
  [[noreturn]] void changed_after_use(Val target, const char* what) const;
  bool hashable(Val v, int depth) const;
  void add_pairs(Node& d, const Val* kv, size_t n);
  void append_items(Node& list, const Val* v, size_t n);
  bool try_flat_dict();
  bool flat_value(const uint8_t*& q, Val& out);
  [[gnu::always_inline]] bool flat_get(uint64_t idx, Val& out) {
    size_t base = memo_.size();
    if (idx < base) [[likely]] {
      out = memo_at(idx);
      if (out.is_node()) [[unlikely]]
        flat_get_node(out);
      if (out.tag() == Val::Skipped) [[unlikely]]
        throw NeedsFullRead{};
      return true;
    }
    idx -= base;
    if (idx == 0 || idx >= flat_memo_.size()) return false;  // the dict itself, or unknown
    out = flat_memo_[idx];
    return true;
  }
  void flat_get_node(Val& out);
  std::vector<Val> flat_kv_;
  // Memo values made inside the flat dict, in order (slot 0: the dict). A
  // fixed buffer: this is reset once per trace entry. Overflow makes the
  // fast paths give up and the generic path take the dict.
  struct FlatMemo {
    static constexpr size_t kCap = 256;
    Val v[kCap];
    size_t n = 1;
    bool overflow = false;
    size_t size() const { return n; }
    void push_back(Val x) {
      if (n < kCap)
        v[n++] = x;
      else
        overflow = true;
    }
    Val& operator[](size_t i) { return v[i]; }
    void reset() {
      n = 1;
      overflow = false;
    }
    const Val* begin() const { return v; }
    const Val* end() const { return v + n; }
  };
  FlatMemo flat_memo_;
  std::vector<FrameId> flat_frames_;
  std::vector<uint32_t> flat_gets_;  // nodes whose gets were bumped, undone on bail-out
  FrameTable* frames_ = nullptr;

 public:
  // Enables the fast path for flat dicts (trace entries, frames), which
  // interns frame lists into `frames` as stacks directly. Dicts that start
  // with the key "action" or `name_key` take it; the row lane reads the
  // model's trace keys (trace_fields.h), an oom entry's "device_free" as
  // its addr.
  void enable_fast_path(FrameTable* frames, StrId name_key) {
    frames_ = frames;
    name_key_ = name_key;
    for (size_t k = 0; k < kTraceFieldCount; ++k)
      set_row_key(strings_.intern(kTraceKeys[k]), static_cast<uint8_t>(k));
    set_row_key(strings_.intern(kDeviceFreeKey), kRowAddr);
    action_key_ = strings_.intern(kTraceKeys[kRowAction]);
  }

 private:
  StrId action_key_ = 0, name_key_ = 0;
  StrId skip_key_ = 0;
  bool skipped_ = false;
  std::vector<uint8_t> row_key_of_;  // string id -> RowKey
  void set_row_key(StrId s, uint8_t k) {
    if (s >= row_key_of_.size()) row_key_of_.resize(s + 1, kRowNone);
    row_key_of_[s] = k;
  }
  bool try_row();
  bool at_value_of(StrId key) const;
  // The memo slot holding "action" among the last 2^20 (the first one
  // stored, which entries read), or UINT64_MAX.
  uint64_t action_slot() const;
  void skip_list();
  bool row_str(const uint8_t*& q, StrId& out);
  template <TraceKind K>
  bool row_value(const uint8_t*& q, TraceValue<K>& out);
  bool row_frames(const uint8_t*& q, StackId& out);
  bool row_frame_ref(const uint8_t*& q, FrameId& out);
  bool row_memo_ref(const uint8_t*& q, Val& v);
  RowFields row_;
  std::array<pickle_op::KeySlot, RowFields::kMax> key_slots_{};
  // Interns a string, remembering the last one: trace entries repeat the
  // same short literal ("N/A") entry after entry.
  std::string_view last_str_;
  StrId last_str_id_ = 0;
  [[gnu::always_inline]] StrId intern_recent(std::string_view sv) {
    bool same = sv.size() == last_str_.size();
    for (size_t i = 0; same && i < sv.size(); ++i) same = sv[i] == last_str_[i];
    if (!same) {
      last_str_id_ = strings_.intern(sv);
      last_str_ = strings_.get(last_str_id_);
    }
    return last_str_id_;
  }

  ByteSource& src_;
  StringTable& strings_;
  DictHook* hook_;
  Progress progress_;
  std::vector<char> buf_;
  const uint8_t* base_ = nullptr;  // buffer start (or the mapped file)
  const uint8_t* next_release_ = nullptr;
  static constexpr size_t kReleaseStep = 2 << 20;
  void release_consumed();
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t buf_offset_ = 0;  // file offset of buf_[0]
  uint64_t op_offset_ = 0;   // offset of the opcode being run
  uint64_t next_progress_ = 0;
  bool eof_ = false;

  // Values and marks the stack may hold at once. Python's pickler pushes
  // list and dict items in batches of 1000, so a snapshot needs few.
  static constexpr size_t kMaxStack = size_t{1} << 24;
  std::vector<Val> stack_;
  std::vector<size_t> marks_;
  // Memo slots are 32 bits (tag + 28-bit payload); the rare value that does
  // not fit lives in memo_wide_ and its slot holds kWide.
  static constexpr uint32_t kWide = UINT32_MAX;
  Column<uint32_t> memo_;  // uninitialised on resize: say what new slots hold
  std::unordered_map<uint64_t, Val> memo_wide_;
  void memo_set(size_t idx, Val v);
  [[gnu::always_inline]] void memo_push(Val v) {
    if (v.payload() < (uint64_t{1} << 28)) [[likely]] {  // tags stop short of kWide's 15
      memo_.push_back(static_cast<uint32_t>((uint64_t{v.tag()} << 28) | v.payload()));
    } else {
      memo_.push_back(0);
      memo_set(memo_.size() - 1, v);
    }
  }
  [[gnu::always_inline]] Val memo_at(size_t idx) const {
    uint32_t m = memo_[idx];
    if (m == kWide) [[unlikely]]
      return memo_wide_.at(idx);
    return Val::make(static_cast<Val::Tag>(m >> 28), m & ((1u << 28) - 1));
  }
  std::unordered_map<uint64_t, Val> sparse_memo_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> free_nodes_;
  uint64_t shared_changes_ = 0;
  uint64_t frame_end_ = 0;      // where the last FRAME says its bytes end
  uint64_t memo_rewrites_ = 0;  // stores into a memo slot already stored
  std::vector<double> floats_;
  std::vector<std::string> blobs_;  // bytes and big ints

  // Parallel decode (parallel_decode.cpp). Declared last: its destructor
  // stops and joins the helper threads before anything they read goes.
  StrId par_key_ = 0, filename_key_ = 0, line_key_ = 0;
  const uint8_t* par_check_ = reinterpret_cast<const uint8_t*>(~uintptr_t{0});
  void par_arm();
  void par_step();
  bool par_launch();
  bool par_take(row_chunks::Share& s);
  // The steps of taking a share (parallel_decode.cpp).
  struct ShareIds;
  bool par_resolve(const row_chunks::Share& s, ShareIds& id) const;
  void par_intern(const row_chunks::Share& s, ShareIds& id);
  void par_fill(const row_chunks::Share& s, const ShareIds& id, uint64_t memo_base,
                uint64_t row_base);
  void par_replay(const row_chunks::Share& s, uint64_t memo_base, uint64_t row_base);
  bool share_fits_stack(const row_chunks::Share& s) const;
  struct Parallel;
  struct ParallelDeleter {
    void operator()(Parallel* p) const;
  };
  std::unique_ptr<Parallel, ParallelDeleter> par_;
};

}  // namespace memsight
