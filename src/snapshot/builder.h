#pragma once
// The conversion of a pickle into the snapshot model (reader.cpp says how
// a read goes). Trace entries and frames are converted while the pickle
// streams in, through the unpickler's DictHook: the row lane's rows
// (commit_row, here, as it runs once per entry) and dicts the fast paths
// leave to it (trace_entries.cpp, stacks.cpp); segments, blocks and the
// top-level values once the VM reaches STOP (segments.cpp, reader.cpp).
// Values the model keeps verbatim are made by materialize.cpp.
#include <array>
#include <cstring>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "memsight/error.h"
#include "memsight/snapshot.h"
#include "pickle/unpickler.h"

namespace memsight::build {

inline constexpr int kMaxDepth = 1000;

// Key names the model knows, interned first so their ids are small
// constants: a trace entry's (trace_fields.h), then the others.
// clang-format off
#define MEMSIGHT_OTHER_KEYS(X) \
  X(DeviceFree, kDeviceFreeKey)   \
  X(Device, "device")             \
  X(Address, "address")           \
  X(TotalSize, "total_size")      \
  X(AllocatedSize, "allocated_size") \
  X(ActiveSize, "active_size")    \
  X(RequestedSize, "requested_size") \
  X(SegmentType, "segment_type")  \
  X(SegmentPoolId, "segment_pool_id") \
  X(IsExpandable, "is_expandable") \
  X(Blocks, "blocks")             \
  X(State, "state")               \
  X(Name, "name")                 \
  X(Filename, "filename")         \
  X(Line, "line")                 \
  X(Segments, "segments")         \
  X(DeviceTraces, "device_traces")
// clang-format on
#define MEMSIGHT_TRACE_KEY_ID(Name, key, column, Kind) k##Name,
#define MEMSIGHT_KEY_ID(Name, text) k##Name,
enum Key : StrId {
  kEmpty = 0,
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_KEY_ID) MEMSIGHT_OTHER_KEYS(MEMSIGHT_KEY_ID) kKeyCount
};
#define MEMSIGHT_TRACE_KEY_TEXT(Name, key, column, Kind) key,
#define MEMSIGHT_KEY_TEXT(Name, text) text,
inline constexpr std::array<std::string_view, kKeyCount> kKeyNames = {
    "", MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_KEY_TEXT) MEMSIGHT_OTHER_KEYS(MEMSIGHT_KEY_TEXT)};
#undef MEMSIGHT_TRACE_KEY_ID
#undef MEMSIGHT_KEY_ID
#undef MEMSIGHT_TRACE_KEY_TEXT
#undef MEMSIGHT_KEY_TEXT
#undef MEMSIGHT_OTHER_KEYS

class Builder : public DictHook {
 public:
  explicit Builder(Snapshot& s) : snap_(s) {
    for (auto name : kKeyNames) snap_.strings.intern(name);
  }

  bool convert_dict(Unpickler& vm, std::span<const Val> items, Val& out) override {
    if (items[0].tag() != Val::Str) return false;
    StrId k0 = items[0].idx();
    if (k0 == kAction && items[1].tag() == Val::Str) {
      out = Val::make(Val::Row, make_row(vm, items));
      return true;
    }
    if (k0 == kName && items.size() >= 6 && items[2] == Val::make(Val::Str, kFilename) &&
        items[4] == Val::make(Val::Str, kLine)) {
      out = Val::make(Val::FrameRef, make_frame(vm, items));
      return true;
    }
    return false;
  }

  void finish(Unpickler& vm, Val root);

  // A RowKey is a trace field's place in the model's table.
  static constexpr const Field (&kFieldOf)[kRowKeyCount] = kTraceFields;

  TraceTable* trace_table() override { return &snap_.trace; }

  ShapeId row_shape(const RowFields& r) override {
    ShapeKey keys[RowFields::kMax];
    for (int i = 0; i < r.n; ++i) keys[i] = {r.keys[i], kFieldOf[r.field[i]]};
    return snap_.shapes.intern({keys, static_cast<size_t>(r.n)});
  }

  void set_row_action(uint32_t row, StrId s) override {
    Action a = action_of(s);
    snap_.trace.action[row] = a;
    if (a == Action::Other) snap_.trace.action_name[row] = s;
  }

  [[gnu::flatten]] uint32_t commit_row(const RowFields& r) override {
    TraceTable& t = snap_.trace;
    auto row = static_cast<uint32_t>(t.rows());
    auto n = static_cast<size_t>(r.n);
    // Same keys in the same order as the previous row: same shape.
    // Compared whole (fixed sizes compile to a few vector compares); the
    // unused tail is zeroed in the copy and in the row.
    StrId keys_now[RowFields::kMax] = {};
    uint8_t fields_now[RowFields::kMax] = {};
    for (size_t i = 0; i < n; ++i) {
      keys_now[i] = r.keys[i];
      fields_now[i] = r.field[i];
    }
    bool same = n == last_row_n_ && std::memcmp(keys_now, last_row_keys_, sizeof keys_now) == 0 &&
                std::memcmp(fields_now, last_row_fields_, sizeof fields_now) == 0;
    if (!same) {
      last_row_n_ = n;
      std::memcpy(last_row_keys_, keys_now, sizeof keys_now);
      std::memcpy(last_row_fields_, fields_now, sizeof fields_now);
      ShapeKey keys[RowFields::kMax];
      for (size_t i = 0; i < n; ++i) keys[i] = {r.keys[i], kFieldOf[r.field[i]]};
      last_row_shape_ = snap_.shapes.intern({keys, n});
    }
    Action a = action_of(r.values.action);
    if (a == Action::Other) t.action_name[row] = r.values.action;
    t.push_back_row(a, r.values, last_row_shape_);
    return row;
  }

 private:
  uint32_t make_row(Unpickler& vm, std::span<const Val> items);
  Field entry_field(Unpickler& vm, StrId key, Val v, uint32_t& seen, TraceEntry& e);
  template <TraceKind K>
  bool take(Unpickler& vm, Val v, TraceValue<K>& out);
  static bool plain_frame(Unpickler& vm, std::span<const Val> kv);
  FrameId make_frame(Unpickler& vm, std::span<const Val> items);
  bool to_stack(Unpickler& vm, Val v, StackId& out);
  PyValue materialize(Unpickler& vm, Val v, int depth = 0);
  PyValue make(Unpickler& vm, Val v, int depth);
  void make_deferred(Unpickler& vm);
  void make_held(Unpickler& vm, const PyValue& v, int depth);
  void make_held_by(Unpickler& vm, Val row_or_frame, int depth);
  PyValue row_value(Unpickler& vm, uint32_t row, int depth);
  PyValue str_value(StrId id);
  PyValue frame_value(FrameId id);
  void convert_segments(Unpickler& vm, Val list);
  Segment convert_segment(Unpickler& vm, Val dict, Val& blocks);
  Field segment_field(Unpickler& vm, StrId key, Val raw, Segment& seg, Val& blocks);
  Field block_field(Unpickler& vm, StrId key, Val raw, Block& b);
  template <class FieldOf>
  ShapeId read_dict(Unpickler& vm, std::span<const Val> items, FieldOf field_of, uint32_t& extra);
  void convert_traces(Unpickler& vm, Val list);
  uint32_t row_from_generic(Unpickler& vm, Val dict);
  static bool is_int(Val v) { return v.tag() == Val::Int; }
  // A dict the stream converted into a trace entry or a frame.
  static bool converted_as_other(Val v) { return v.tag() == Val::Row || v.tag() == Val::FrameRef; }
  static PyValue::Kind kind_of(Val node) {
    return node.tag() == Val::List    ? PyValue::Kind::List
           : node.tag() == Val::Tuple ? PyValue::Kind::Tuple
                                      : PyValue::Kind::Dict;
  }
  std::string type_name(Val v) const;

  // parse_action, cached by string id (0xff: not looked up yet).
  Action action_of(StrId s) {
    if (s >= action_cache_.size()) action_cache_.resize(s + 64, 0xff);
    if (action_cache_[s] == 0xff)
      action_cache_[s] = static_cast<uint8_t>(parse_action(snap_.str(s)));
    return static_cast<Action>(action_cache_[s]);
  }

  Snapshot& snap_;
  // The row lane's previous row (kept apart from make_row's cache).
  size_t last_row_n_ = 0;
  ShapeId last_row_shape_ = 0;
  StrId last_row_keys_[RowFields::kMax] = {};
  uint8_t last_row_fields_[RowFields::kMax] = {};
  std::vector<uint8_t> action_cache_;
  std::vector<ShapeKey> shape_buf_;
  std::vector<ShapeKey> last_shape_;
  ShapeId last_shape_id_ = 0;
  std::vector<FrameId> frame_buf_;
  // What materialize made of values that may be referred to again, by the
  // value's bits: (the VM's shared_changes() then, the value).
  std::unordered_map<uint64_t, std::pair<uint64_t, PyValue>> made_;
  std::unordered_map<StrId, PyValue> long_strs_;
  // Containers met while the pickle streamed in, by the node's bits: the
  // value their holders share, filled by finish() (see materialize).
  struct Deferred {
    PyItems items;
    bool making = false, made = false;
  };
  std::unordered_map<uint64_t, Deferred> deferred_;
  std::unordered_map<const void*, uint64_t> deferred_by_items_;  // once the pickle has ended
  bool streaming_ = true;                                        // until STOP
  std::unordered_set<uint64_t> making_;  // the containers materialize is making now
  // The frames list of a row from the generic path, by row, where the
  // list was read through the memo (row_value).
  std::unordered_map<uint32_t, uint64_t> frames_node_;
};

// A dict's items as Python holds them (a key written twice: its first
// place, its last value).
std::vector<Val> python_dict_items(std::span<const Val> items);
bool has_duplicate_keys(std::span<const Val> items);

}  // namespace memsight::build
