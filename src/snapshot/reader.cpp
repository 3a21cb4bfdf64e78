// Pickle -> Snapshot model. Trace entries and frames are converted while the
// pickle streams in (see DictHook); segments, blocks and the small top-level
// values are converted once the VM reaches STOP.
#include "memsight/reader.h"

#include <array>
#include <cstring>
#include <unordered_map>

#include "input/input_kind.h"
#include "input/source.h"
#include "pickle/row_chunks.h"
#include "pickle/unpickler.h"
#include "snapshot/read_internal.h"

namespace memsight {
namespace {

constexpr int kMaxDepth = 1000;

// Key names the model knows, interned first so their ids are small
// constants: a trace entry's (trace_fields.h), then the others.
#define MEMSIGHT_OTHER_KEYS(X)                                                                    \
  X(DeviceFree, kDeviceFreeKey)                                                                   \
  X(Device, "device")                                                                             \
  X(Address, "address") X(TotalSize, "total_size") X(AllocatedSize, "allocated_size")             \
      X(ActiveSize, "active_size") X(RequestedSize, "requested_size")                             \
          X(SegmentType, "segment_type") X(SegmentPoolId, "segment_pool_id")                      \
              X(IsExpandable, "is_expandable") X(Blocks, "blocks") X(State, "state")              \
                  X(Name, "name") X(Filename, "filename") X(Line, "line") X(Segments, "segments") \
                      X(DeviceTraces, "device_traces")
#define MEMSIGHT_TRACE_KEY_ID(Name, key, column, Kind) k##Name,
#define MEMSIGHT_KEY_ID(Name, text) k##Name,
enum Key : StrId {
  kEmpty = 0,
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_KEY_ID) MEMSIGHT_OTHER_KEYS(MEMSIGHT_KEY_ID) kKeyCount
};
#define MEMSIGHT_TRACE_KEY_TEXT(Name, key, column, Kind) key,
#define MEMSIGHT_KEY_TEXT(Name, text) text,
constexpr std::array<std::string_view, kKeyCount> kKeyNames = {
    "", MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_KEY_TEXT) MEMSIGHT_OTHER_KEYS(MEMSIGHT_KEY_TEXT)};

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
  PyValue str_value(StrId id);
  PyValue frame_value(FrameId id);
  void convert_segments(Unpickler& vm, Val list);
  void convert_traces(Unpickler& vm, Val list);
  uint32_t row_from_generic(Unpickler& vm, Val dict);
  static bool is_int(Val v) { return v.tag() == Val::Int; }
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
};

std::string Builder::type_name(Val v) const {
  switch (v.tag()) {
    case Val::None:
      return "None";
    case Val::False:
    case Val::True:
      return "a bool";
    case Val::Int:
    case Val::Big:
      return "an int";
    case Val::Float:
      return "a float";
    case Val::Str:
      return "a str";
    case Val::Bytes:
      return "bytes";
    case Val::List:
      return "a list";
    case Val::Tuple:
      return "a tuple";
    case Val::Dict:
      return "a dict";
    default:
      return "a dict";
  }
}

// A dict's items as Python holds them: a key written twice keeps its first
// place and its last value (pickle.loads would have overwritten it), so
// what memsight reads and writes back is what Python would see.
std::vector<Val> python_dict_items(std::span<const Val> items) {
  std::vector<Val> out;
  out.reserve(items.size());
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    size_t j = 0;
    while (j < out.size() && out[j] != items[i]) j += 2;
    if (j < out.size()) {
      out[j + 1] = items[i + 1];
    } else {
      out.push_back(items[i]);
      out.push_back(items[i + 1]);
    }
  }
  return out;
}

bool has_duplicate_keys(std::span<const Val> items) {
  for (size_t i = 0; i + 1 < items.size(); i += 2)
    for (size_t j = i + 2; j + 1 < items.size(); j += 2)
      if (items[i] == items[j]) return true;
  return false;
}

// Field of a trace-entry key with a value of the right type, else Extra.
// Hot: runs once per trace entry, so the row is built in locals and pushed
// once, and the key layout is compared with the previous row's as it goes.
uint32_t Builder::make_row(Unpickler& vm, std::span<const Val> items) {
  std::vector<Val> unique;
  if (has_duplicate_keys(items)) {
    unique = python_dict_items(items);
    items = unique;
  }
  TraceTable& t = snap_.trace;
  auto row = static_cast<uint32_t>(t.rows());
  TraceEntry e;
  std::vector<PyValue>* extras = nullptr;
  uint32_t seen = 0;
  size_t n = items.size() / 2;
  bool same_shape = n == last_shape_.size();
  if (shape_buf_.size() < n) shape_buf_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Val k = items[2 * i];
    StrId key = k.tag() == Val::Str ? k.idx() : 0;
    Field f = k.tag() == Val::Str ? entry_field(vm, key, items[2 * i + 1], seen, e) : Field::Extra;
    if (f == Field::Extra) {
      if (!extras) extras = &t.extras[row];
      if (k.tag() != Val::Str) {
        // Non-string keys: keep the key too, as a (key, value) tuple.
        extras->push_back(PyValue::tuple({materialize(vm, k), materialize(vm, items[2 * i + 1])}));
        key = 0;
      } else {
        extras->push_back(materialize(vm, items[2 * i + 1]));
      }
    }
    shape_buf_[i] = {key, f};
    same_shape = same_shape && last_shape_[i].key == key && last_shape_[i].field == f;
  }
  if (!same_shape) {
    std::span<const ShapeKey> keys(shape_buf_.data(), n);
    last_shape_id_ = snap_.shapes.intern(keys);
    last_shape_.assign(keys.begin(), keys.end());
  }
  // No action string (a generic entry whose action is no str) reads as 0: "".
  Action action = action_of(e.action);
  if (action == Action::Other) t.action_name[row] = e.action;
  t.push_back_row(action, e, last_shape_id_);
  return row;
}

// The field of a trace entry's key `key` when its value `v` is of the
// field's kind, with the value stored in `e`; else Extra. A field seen
// before (an oom entry's "device_free" besides "addr") stays verbatim and
// leaves the first one's value alone.
Field Builder::entry_field(Unpickler& vm, StrId key, Val v, uint32_t& seen, TraceEntry& e) {
  Field f;
  auto fresh = [&](Field field) {
    f = field;
    return !(seen & (1u << static_cast<int>(field)));
  };
  bool ok;
  switch (key) {
#define MEMSIGHT_ENTRY_CASE(Name, text, column, Kind)                  \
  case k##Name:                                                        \
    ok = fresh(Field::Name) && take<TraceKind::Kind>(vm, v, e.column); \
    break;
    MEMSIGHT_TRACE_FIELDS(MEMSIGHT_ENTRY_CASE)
#undef MEMSIGHT_ENTRY_CASE
    case kDeviceFree:
      ok = fresh(Field::Addr) && take<TraceKind::Int>(vm, v, e.addr);
      break;
    default:
      return Field::Extra;
  }
  if (!ok) return Field::Extra;
  seen |= 1u << static_cast<int>(f);
  return f;
}

// A trace field's value of kind K: false when `v` is not one.
template <TraceKind K>
bool Builder::take(Unpickler& vm, Val v, TraceValue<K>& out) {
  if constexpr (K == TraceKind::Stack) {
    return to_stack(vm, v, out);  // by the node: to_stack converts it in place
  } else {
    if (v.is_node()) v = vm.resolve(v);
    bool ok = K == TraceKind::Int ? is_int(v) : v.tag() == Val::Str;
    if (!ok) return false;
    if constexpr (K == TraceKind::Int)
      out = v.as_int();
    else
      out = v.idx();
    return true;
  }
}

// A dict's items as torch writes a frame: exactly name, filename and line,
// in that order, holding a str, a str and an int.
bool Builder::plain_frame(Unpickler& vm, std::span<const Val> kv) {
  return kv.size() == 6 && kv[0] == Val::make(Val::Str, kName) &&
         kv[2] == Val::make(Val::Str, kFilename) && kv[4] == Val::make(Val::Str, kLine) &&
         vm.resolve(kv[1]).tag() == Val::Str && vm.resolve(kv[3]).tag() == Val::Str &&
         vm.resolve(kv[5]).tag() == Val::Int;
}

// `items` start with name, filename and line (convert_dict checked).
FrameId Builder::make_frame(Unpickler& vm, std::span<const Val> items) {
  Frame f;
  Val name = vm.resolve(items[1]), file = vm.resolve(items[3]), line = vm.resolve(items[5]);
  bool plain = plain_frame(vm, items);
  if (name.tag() == Val::Str) f.name = name.idx();
  if (file.tag() == Val::Str) f.filename = file.idx();
  if (line.tag() == Val::Int) f.line = line.as_int();
  if (!plain) {
    PyValue d = PyValue::dict();
    for (size_t i = 0; i < items.size(); ++i) d.items.push_back(materialize(vm, items[i]));
    snap_.frames.extras.push_back(std::move(d));
    f.extra = static_cast<uint32_t>(snap_.frames.extras.size());
  }
  return snap_.frames.intern_frame(f);
}

// A list of frames becomes an interned stack; the list node is converted in
// place so every other holder (a block, a memo read) sees the stack too.
bool Builder::to_stack(Unpickler& vm, Val v, StackId& out) {
  v = vm.resolve(v);
  if (v.tag() == Val::StackRef) {
    out = v.idx();
    return true;
  }
  if (v.tag() != Val::List) return false;
  const std::vector<Val> items = vm.list_items(v);
  // A list with another item stays a plain value, and leaves nothing behind
  // (a frame's dict kept but written nowhere would count as one more holder).
  for (Val item : items)
    if (Val r = vm.resolve(item); r.tag() != Val::FrameRef && r.tag() != Val::Dict) return false;
  frame_buf_.clear();
  bool only_frames = true;
  for (Val item : items) {
    item = vm.resolve(item);
    if (item.tag() == Val::FrameRef) {
      frame_buf_.push_back(item.idx());
    } else {
      only_frames = false;
      const std::vector<Val>& kv = vm.node(item).items;
      if (plain_frame(vm, kv)) {
        // A plain frame after all (its dict was not converted as it was read,
        // a memo read having come first): the frame it is everywhere else.
        frame_buf_.push_back(make_frame(vm, kv));
        continue;
      }
      // A frame dict in another key order: keep it whole as an extra. Its
      // fields are read from the node: its value may be made later.
      auto get = [&](StrId key) {  // the first value of a key, as PyValue::get finds it
        for (size_t i = 0; i + 1 < kv.size(); i += 2)
          if (kv[i] == Val::make(Val::Str, key)) return vm.resolve(kv[i + 1]);
        return Val{};
      };
      Frame f;
      if (Val n = get(kName); n.tag() == Val::Str) f.name = n.idx();
      if (Val n = get(kFilename); n.tag() == Val::Str) f.filename = n.idx();
      if (Val n = get(kLine); n.tag() == Val::Int) f.line = n.as_int();
      snap_.frames.extras.push_back(materialize(vm, item));
      f.extra = static_cast<uint32_t>(snap_.frames.extras.size());
      frame_buf_.push_back(snap_.frames.intern_frame(f));
    }
  }
  out = snap_.frames.intern_stack(frame_buf_);
  // A list of other dicts may be something else too (a segment's blocks,
  // shared by a memo read): it stays a list for its other holders.
  if (only_frames) vm.convert_node(v, Val::make(Val::StackRef, out));
  return true;
}

// A value the pickle may refer to many times (a memo read) is made once and
// shared: a string, a frame, a stack, a row or a container read through the
// memo. A container changed after it was made is made again, as pickle.loads
// would show the change; until then every holder shares one copy, however
// deeply the references nest (a 200-byte pickle can nest 2^24 references).
//
// A container met while the pickle streams in (an unknown key of a trace
// entry or a frame) is made only once the pickle has ended: until then its
// holders share one empty value, which finish() fills. Only then is every
// memo read of it and of what it holds known, so an early holder shares
// with later ones as pickle.loads shares the object, and holds what
// pickle.loads would show. It is also what makes a written-back pickle
// stable: the writer writes a shared container once and refers to it
// afterwards, and that reads back into the same sharing, where a copy made
// before the reference was seen would not be shared with it.
PyValue Builder::materialize(Unpickler& vm, Val v, int depth) {
  if (depth > kMaxDepth) throw Error("corrupted pickle: values nested deeper than 1000 levels");
  if (v.is_node()) {
    // By the node, which a holder keeps even when the node is later turned
    // into a compact value (a frames list into a stack).
    auto it = deferred_.find(v.bits);
    if (it == deferred_.end() && streaming_ && vm.resolve(v).is_node()) {
      it = deferred_.emplace(v.bits, Deferred{PyItems::to_fill()}).first;
      // Held here too, as by a memo read: the VM must not recycle the node
      // (nor its id, which keys this table) when it converts it.
      ++vm.node(v).gets;
    }
    if (it != deferred_.end()) {
      Deferred& d = it->second;
      if (!streaming_ && !d.made) {
        // A value met again while it is being made contains itself.
        if (d.making) throw Error("corrupted pickle: values nested deeper than 1000 levels");
        d.making = true;
        d.items.fill(make(vm, vm.resolve(v), depth).items);
        d.made = true;
      }
      PyValue p;
      p.kind = kind_of(v);
      p.items = d.items;
      return p;
    }
  }
  v = vm.resolve(v);
  switch (v.tag()) {
    case Val::None:
      return PyValue::none();
    case Val::False:
      return PyValue::boolean(false);
    case Val::True:
      return PyValue::boolean(true);
    case Val::Int:
      return PyValue::integer(v.as_int());
    case Val::Float:
      return PyValue::real(vm.float_at(v));
    case Val::Str:
      return str_value(v.idx());
    case Val::Skipped:
      throw NeedsFullRead{};
    case Val::Row:
    case Val::FrameRef:
      if (!streaming_) make_held_by(vm, v, depth + 1);
      break;
    default:
      break;
  }
  // Nodes only the stack held (never read through the memo) have one holder.
  bool shared = !v.is_node() || vm.node(v).gets > 0;
  if (shared) {
    auto it = made_.find(v.bits);
    if (it != made_.end() && (!v.is_node() || it->second.first == vm.shared_changes()))
      return it->second.second;
  }
  PyValue p = make(vm, v, depth);
  if (shared) made_[v.bits] = {vm.shared_changes(), p};
  return p;
}

// Fills the containers met while the pickle streamed in (see materialize).
void Builder::make_deferred(Unpickler& vm) {
  std::vector<uint64_t> bits;
  bits.reserve(deferred_.size());
  for (const auto& [b, d] : deferred_) bits.push_back(b);
  deferred_by_items_.reserve(bits.size());
  for (uint64_t b : bits) deferred_by_items_.emplace(deferred_.at(b).items.identity(), b);
  for (uint64_t b : bits) materialize(vm, Val{b});
}

// A row or a frame copied into another value brings the containers its
// unknown keys hold (at the top, or inside a (key, value) tuple or a frame's
// dict): those are made first, through materialize, so a value that holds
// itself this way is refused as any other, and nesting is counted across.
void Builder::make_held(Unpickler& vm, const PyValue& v, int depth) {
  auto make_one = [&](const PyValue& x) {
    auto it = deferred_by_items_.find(x.items.identity());
    if (it != deferred_by_items_.end()) materialize(vm, Val{it->second}, depth);
  };
  if (deferred_by_items_.empty() || !v.items.identity()) return;
  make_one(v);
  if (v.kind == PyValue::Kind::Tuple || v.kind == PyValue::Kind::Dict)
    for (const PyValue& x : v.items) make_one(x);
}

void Builder::make_held_by(Unpickler& vm, Val v, int depth) {
  auto frame = [&](FrameId id) {
    if (uint32_t x = snap_.frames.frame(id).extra) make_held(vm, snap_.frames.extras[x - 1], depth);
  };
  if (v.tag() == Val::FrameRef) return frame(v.idx());
  if (auto it = snap_.trace.extras.find(v.idx()); it != snap_.trace.extras.end())
    for (const PyValue& x : it->second) make_held(vm, x, depth);
  for (FrameId f : snap_.frames.stack(snap_.trace.stack[v.idx()])) frame(f);
}

// The value of a value that is not a plain scalar, made anew.
PyValue Builder::make(Unpickler& vm, Val v, int depth) {
  PyValue p;
  switch (v.tag()) {
    case Val::Big:
      p.kind = PyValue::Kind::BigInt;
      p.s = vm.big_at(v);
      break;
    case Val::Bytes:
      p.kind = PyValue::Kind::Bytes;
      p.s = vm.bytes_at(v);
      break;
    case Val::List:
    case Val::Tuple:
    case Val::Dict: {
      p.kind = kind_of(v);
      // Copy: materialising may recurse into the node pool and grow it.
      std::vector<Val> items = v.tag() == Val::List ? vm.list_items(v) : vm.node(v).items;
      std::vector<PyValue> out;
      out.reserve(items.size());
      for (Val item : items) out.push_back(materialize(vm, item, depth + 1));
      p.items = std::move(out);
      break;
    }
    case Val::FrameRef:
      p = frame_value(v.idx());
      break;
    case Val::StackRef: {
      // Each frame's value is shared with every other holder of the frame,
      // whichever way it was reached: one frame, one value.
      std::vector<PyValue> frames;
      for (FrameId f : snap_.frames.stack(v.idx()))
        frames.push_back(materialize(vm, Val::make(Val::FrameRef, f), depth + 1));
      p = PyValue::list(std::move(frames));
      break;
    }
    case Val::Row:
      p = row_to_pyvalue(snap_, v.idx());
      break;
    default:
      break;
  }
  return p;
}

PyValue Builder::str_value(StrId id) {
  std::string_view text = snap_.str(id);
  // Short strings are cheaper copied than looked up.
  if (text.size() < 64) return PyValue::str(text);
  auto [it, inserted] = long_strs_.try_emplace(id);
  if (inserted) it->second = PyValue::str(text);
  return it->second;
}

// A frame as its dict, its strings shared with every other holder.
PyValue Builder::frame_value(FrameId id) {
  const Frame& f = snap_.frames.frame(id);
  if (f.extra) return snap_.frames.extras[f.extra - 1];
  PyValue d = PyValue::dict();
  d.items = {str_value(kName),      str_value(f.name), str_value(kFilename),
             str_value(f.filename), str_value(kLine),  PyValue::integer(f.line)};
  return d;
}

void Builder::finish(Unpickler& vm, Val root) {
  streaming_ = false;
  make_deferred(vm);
  root = vm.resolve(root);
  if (root.tag() == Val::List) {
    // memory_snapshot() output: a bare list of segments.
    snap_.legacy_segment_list = true;
    convert_segments(vm, root);
    return;
  }
  if (root.tag() != Val::Dict)
    throw Error("not a memory snapshot: the pickle holds " + type_name(root) +
                ", expected a dict with 'segments' and 'device_traces'");
  // No node is created from here on, so the reference stays valid.
  const std::vector<Val>& items = vm.node(root).items;
  bool has_segments = false;
  Val traces{};
  bool has_traces = false;
  std::vector<std::string> keys;
  // Sized once: a file of many unknown keys costs a fixed amount per key.
  keys.reserve(items.size() / 2);
  snap_.top_level.reserve(items.size() / 2);
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].tag() != Val::Str)
      throw Error("not a memory snapshot: a top-level key is " + type_name(items[i]));
    keys.emplace_back(snap_.str(items[i].idx()));
  }
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    StrId k = items[i].idx();
    if (k == kSegments) {
      has_segments = true;
      convert_segments(vm, items[i + 1]);
    } else if (k == kDeviceTraces) {
      has_traces = true;
      traces = items[i + 1];
    }
  }
  if (!has_segments) {
    std::string list;
    for (auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    throw Error("not a memory snapshot: no 'segments' key (top-level keys: " +
                (list.empty() ? std::string("none") : list) + ")");
  }
  // Other top-level values are materialised before the trace table can be
  // reordered, since a Row value refers to the table as read.
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    StrId k = items[i].idx();
    if (k != kSegments && k != kDeviceTraces)
      snap_.top_level.emplace_back(std::string(snap_.str(k)), materialize(vm, items[i + 1]));
  }
  snap_.top_keys = std::move(keys);
  if (has_traces && vm.resolve(traces).tag() == Val::Skipped) {
    snap_.trace_skipped = true;
  } else if (has_traces) {
    convert_traces(vm, traces);
  }
}

void Builder::convert_segments(Unpickler& vm, Val list) {
  list = vm.resolve(list);
  if (list.tag() != Val::List)
    throw Error("not a memory snapshot: 'segments' is " + type_name(list) + ", expected a list");
  const auto segs = vm.list_items(list);
  for (size_t si = 0; si < segs.size(); ++si) {
    Val sv = vm.resolve(segs[si]);
    if (sv.tag() != Val::Dict)
      throw Error("not a memory snapshot: segments[" + std::to_string(si) + "] is " +
                  type_name(sv) + ", expected a dict");
    Segment seg;
    std::vector<ShapeKey> shape;
    std::vector<PyValue> extras;
    Val blocks{};
    bool has_blocks = false;
    const auto items = python_dict_items(vm.node(sv).items);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      Val k = items[i], v = vm.resolve(items[i + 1]);
      Field f = Field::Extra;
      StrId key = k.tag() == Val::Str ? k.idx() : 0;
      if (k.tag() == Val::Str) {
        auto int_field = [&](Field fld, int64_t& dst) {
          if (is_int(v)) f = fld, dst = v.as_int();
        };
        switch (key) {
          case kDevice:
            int_field(Field::Device, seg.device);
            break;
          case kAddress:
            int_field(Field::Address, seg.address);
            break;
          case kTotalSize:
            int_field(Field::TotalSize, seg.total_size);
            break;
          case kAllocatedSize:
            int_field(Field::AllocatedSize, seg.allocated_size);
            break;
          case kActiveSize:
            int_field(Field::ActiveSize, seg.active_size);
            break;
          case kRequestedSize:
            int_field(Field::RequestedSize, seg.requested_size);
            break;
          case kStream:
            int_field(Field::Stream, seg.stream);
            break;
          case kSegmentType:
            if (v.tag() == Val::Str) f = Field::SegmentType, seg.segment_type = v.idx();
            break;
          case kSegmentPoolId:
            if (v.tag() == Val::Tuple && vm.node(v).items.size() == 2 &&
                is_int(vm.resolve(vm.node(v).items[0])) &&
                is_int(vm.resolve(vm.node(v).items[1]))) {
              f = Field::SegmentPoolId;
              seg.pool_id[0] = vm.resolve(vm.node(v).items[0]).as_int();
              seg.pool_id[1] = vm.resolve(vm.node(v).items[1]).as_int();
            }
            break;
          case kIsExpandable:
            if (v.tag() == Val::True || v.tag() == Val::False)
              f = Field::IsExpandable, seg.is_expandable = v.tag() == Val::True;
            break;
          case kFrames:
            if (to_stack(vm, items[i + 1], seg.stack)) f = Field::Frames;
            break;
          case kBlocks:
            if (v.tag() == Val::List) f = Field::Blocks, blocks = v, has_blocks = true;
            break;
          default:
            break;
        }
      }
      if (f == Field::Extra)
        extras.push_back(k.tag() == Val::Str
                             ? materialize(vm, items[i + 1])
                             : PyValue::tuple({materialize(vm, k), materialize(vm, items[i + 1])}));
      shape.push_back({key, f});
    }
    seg.shape = snap_.shapes.intern(shape);
    if (!extras.empty()) {
      snap_.extras.push_back(std::move(extras));
      seg.extra = static_cast<uint32_t>(snap_.extras.size());
    }
    seg.block_begin = static_cast<uint32_t>(snap_.blocks.size());
    if (has_blocks) {
      int64_t running = seg.address;
      const auto bl = vm.list_items(blocks);
      for (size_t bi = 0; bi < bl.size(); ++bi) {
        Val bv = vm.resolve(bl[bi]);
        if (bv.tag() != Val::Dict)
          throw Error("not a memory snapshot: segments[" + std::to_string(si) + "]['blocks'][" +
                      std::to_string(bi) + "] is " + type_name(bv) + ", expected a dict");
        Block b;
        b.address = running;
        std::vector<ShapeKey> bshape;
        std::vector<PyValue> bextras;
        const auto bitems = python_dict_items(vm.node(bv).items);
        for (size_t i = 0; i + 1 < bitems.size(); i += 2) {
          Val k = bitems[i], v = vm.resolve(bitems[i + 1]);
          Field f = Field::Extra;
          StrId key = k.tag() == Val::Str ? k.idx() : 0;
          if (k.tag() == Val::Str) {
            switch (key) {
              case kAddress:
                if (is_int(v)) f = Field::Address, b.address = v.as_int();
                break;
              case kSize:
                if (is_int(v)) f = Field::Size, b.size = v.as_int();
                break;
              case kRequestedSize:
                if (is_int(v)) f = Field::RequestedSize, b.requested_size = v.as_int();
                break;
              case kState:
                if (v.tag() == Val::Str) {
                  f = Field::State;
                  b.state_name = v.idx();
                  auto s = snap_.str(v.idx());
                  b.state = s == "active_allocated"      ? BlockState::ActiveAllocated
                            : s == "active_pending_free" ? BlockState::ActivePendingFree
                            : s == "inactive"            ? BlockState::Inactive
                                                         : BlockState::Other;
                }
                break;
              case kFrames:
                if (to_stack(vm, bitems[i + 1], b.stack)) f = Field::Frames;
                break;
              default:
                break;
            }
          }
          if (f == Field::Extra)
            bextras.push_back(
                k.tag() == Val::Str
                    ? materialize(vm, bitems[i + 1])
                    : PyValue::tuple({materialize(vm, k), materialize(vm, bitems[i + 1])}));
          bshape.push_back({key, f});
        }
        b.shape = snap_.shapes.intern(bshape);
        if (!bextras.empty()) {
          snap_.extras.push_back(std::move(bextras));
          b.extra = static_cast<uint32_t>(snap_.extras.size());
        }
        running = b.address + b.size;
        snap_.blocks.push_back(b);
      }
    }
    seg.block_end = static_cast<uint32_t>(snap_.blocks.size());
    snap_.segments.push_back(seg);
  }
}

uint32_t Builder::row_from_generic(Unpickler& vm, Val dict) {
  const auto items = vm.node(dict).items;
  if (items.empty() || items[0] != Val::make(Val::Str, kAction))
    throw Error("not a memory snapshot: a device trace entry has no 'action' key first");
  return make_row(vm, items);
}

void Builder::convert_traces(Unpickler& vm, Val list) {
  list = vm.resolve(list);
  if (list.tag() != Val::List)
    throw Error("not a memory snapshot: 'device_traces' is " + type_name(list) +
                ", expected a list");
  const auto devices = vm.list_items(list);
  // The usual case: each device's list is a range of rows, in order. Then
  // the table is used as it is, with no per-entry work.
  bool contiguous = true;
  uint32_t expect = 0;
  snap_.device_begin.assign(1, 0);
  for (size_t d = 0; d < devices.size(); ++d) {
    Val dv = vm.resolve(devices[d]);
    if (dv.tag() != Val::List)
      throw Error("not a memory snapshot: device_traces[" + std::to_string(d) + "] is " +
                  type_name(dv) + ", expected a list");
    const Node& n = vm.node(dv);
    if (!n.items.empty() || (n.row_count && n.row_first != expect)) contiguous = false;
    expect += n.row_count;
    snap_.device_begin.push_back(expect);
  }
  if (contiguous && expect == snap_.trace.rows()) return;

  // Rare: entries shared, reordered, stray rows or dicts the fast paths
  // left alone. Gather the rows in device order into a new table.
  std::vector<std::vector<uint32_t>> order(devices.size());
  uint32_t total = 0;
  snap_.device_begin.assign(1, 0);
  for (size_t d = 0; d < devices.size(); ++d) {
    const auto entries = vm.list_items(vm.resolve(devices[d]));
    order[d].reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      Val e = vm.resolve(entries[i]);
      if (e.tag() == Val::Row) {
        order[d].push_back(e.idx());
      } else if (e.tag() == Val::Dict) {
        order[d].push_back(row_from_generic(vm, e));
      } else {
        throw Error("not a memory snapshot: device_traces[" + std::to_string(d) + "][" +
                    std::to_string(i) + "] is " + type_name(e) + ", expected a dict");
      }
    }
    snap_.device_begin.push_back(total += static_cast<uint32_t>(order[d].size()));
  }
  TraceTable old = std::move(snap_.trace);
  TraceTable& t = snap_.trace = TraceTable{};
  t.reserve(total);
  for (auto& o : order)
    for (uint32_t r : o) t.append_row(old, r);
}

}  // namespace

Snapshot read_snapshot(ByteSource& src, const Progress& progress, ReadScope scope) {
  Snapshot snap;
  Builder builder(snap);
  Unpickler vm(src, snap.strings, &builder, progress);
  vm.enable_fast_path(&snap.frames, kName);
  bool skip = scope == ReadScope::SegmentsOnly;
  if (skip)
    vm.skip_value_of(kDeviceTraces);
  else
    vm.decode_in_parallel(kDeviceTraces, kFilename, kLine);
  if (src.total() > 0 && src.compression().empty()) {
    // Reserved, not touched: untouched pages cost no memory, and tables that
    // never reallocate never hold two copies at once. A trace entry takes
    // at least ~60 bytes of pickle.
    if (!skip) snap.trace.reserve(src.total() / 60);
    vm.reserve_memo(src.total() / 30);
  }
  try {
    Val root = vm.run();
    builder.finish(vm, root);
  } catch (const Error&) {
    // After a skip, only a full read may call the input broken.
    if (vm.skipped()) throw NeedsFullRead{};
    throw;
  }
  return snap;
}

namespace {
template <typename Open>
Snapshot read_with_fallback(Open open, const Progress& progress, ReadScope scope) {
  if (scope == ReadScope::SegmentsOnly) {
    try {
      auto src = open();
      return read_snapshot(*src, progress, scope);
    } catch (const NeedsFullRead&) {
    }
  }
  auto src = open();
  return read_snapshot(*src, progress, ReadScope::Everything);
}
}  // namespace

Snapshot read_snapshot_named(const OpenSource& open, const std::string& name,
                             const Progress& progress, ReadScope scope) {
  // Every message names the input once, here.
  // A file of another kind is named with the command that reads it
  // (input_kind.h), whoever opened it: the CLI or the standalone viewer.
  return read_named(name, [&] {
    return read_with_fallback(
        [&] {
          std::unique_ptr<ByteSource> src = open();
          expect_input(src->head(), InputKind::Snapshot, name);
          return src;
        },
        progress, scope);
  });
}

Snapshot read_snapshot_file(const std::string& path, const Progress& progress, ReadScope scope) {
  // Standard input cannot be read twice, so it is always read in full.
  if (path == "-") scope = ReadScope::Everything;
  return read_snapshot_named([&] { return open_source(path); }, path, progress, scope);
}

Snapshot read_snapshot_bytes(std::string_view data, ReadScope scope) {
  return read_with_fallback(
      [&] {
        auto src = memory_source(data);
        expect_input(src->head(), InputKind::Snapshot, "");
        return src;
      },
      {}, scope);
}

}  // namespace memsight
