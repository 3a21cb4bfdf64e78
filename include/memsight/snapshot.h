#pragma once
// The snapshot model: everything a PyTorch CUDA memory snapshot holds, in
// columns, with strings, frames and whole stacks interned. Analyses take a
// `const Snapshot&` and return values; nothing here touches Python or CUDA.

#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memsight/id_slots.h"
#include "memsight/pyvalue.h"
#include "memsight/trace_fields.h"

namespace memsight {

using StrId = uint32_t;    // index into StringTable; 0 is the empty string
using FrameId = uint32_t;  // index into FrameTable::frames
using StackId = uint32_t;  // index into FrameTable stacks; 0 is the empty stack

class StringTable {
 public:
  StringTable();
  StrId intern(std::string_view s);
  std::string_view get(StrId id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  std::vector<std::string_view> strings_;
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t chunk_left_ = 0;
  char* chunk_pos_ = nullptr;
  IdSlots index_;
};

// One stack frame. Frames carry `name, filename, line` in that key order;
// anything else (fx_node_* keys, a different key order) is kept in `extra`.
struct Frame {
  StrId name = 0;
  StrId filename = 0;
  int64_t line = 0;
  uint32_t extra = 0;  // 0: plain frame; else 1 + index into FrameTable::extras
};

class FrameTable {
 public:
  FrameTable();
  FrameId intern_frame(const Frame& f);
  // Interns a whole stack (innermost frame first, as torch stores it).
  StackId intern_stack(std::span<const FrameId> frames);
  std::span<const FrameId> stack(StackId id) const {
    return {stack_frames_.data() + stack_begin_[id], stack_frames_.data() + stack_begin_[id + 1]};
  }
  const Frame& frame(FrameId id) const { return frames_[id]; }
  size_t frame_count() const { return frames_.size(); }
  size_t stack_count() const { return stack_begin_.size() - 1; }
  // A frame whose dict was not plain: the full dict, keys in their order.
  std::vector<PyValue> extras;

 private:
  static uint64_t frame_hash(const Frame& f);
  static bool same_frame(const Frame& a, const Frame& b) {
    return a.name == b.name && a.filename == b.filename && a.line == b.line && a.extra == b.extra;
  }
  std::vector<Frame> frames_;
  IdSlots frame_index_;
  std::vector<uint32_t> stack_begin_;
  std::vector<FrameId> stack_frames_;
  // Stacks are interned once per trace entry, so this is hot.
  IdSlots stack_index_;
};

enum class Action : uint8_t {
  Alloc,
  FreeRequested,
  FreeCompleted,
  SegmentAlloc,
  SegmentFree,
  SegmentMap,
  SegmentUnmap,
  Snapshot,
  Oom,
  Other,  // any other action string (kept verbatim in TraceTable::action_name)
};
std::string_view action_name(Action a);
Action parse_action(std::string_view s);

// Which typed column a key of a dict is stored in; `Extra` keeps the value as
// a PyValue. A Shape is the dict's keys in their original order.
enum class Field : uint8_t {
  Extra,
// trace entry (trace_fields.h); Addr is also an oom entry's "device_free"
#define MEMSIGHT_TRACE_FIELD(Name, key, column, Kind) Name,
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_FIELD)
#undef MEMSIGHT_TRACE_FIELD
  // segment (besides Stream, Frames)
  Device,
  Address,
  TotalSize,
  AllocatedSize,
  ActiveSize,
  RequestedSize,
  SegmentType,
  SegmentPoolId,
  IsExpandable,
  Blocks,
  // block (besides Address, Size, RequestedSize, Frames)
  State,
};

// The trace fields in the order of their table (trace_fields.h).
inline constexpr Field kTraceFields[] = {
#define MEMSIGHT_TRACE_FIELD(Name, key, column, Kind) Field::Name,
    MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_FIELD)
#undef MEMSIGHT_TRACE_FIELD
};

struct ShapeKey {
  StrId key;
  Field field;
};
using ShapeId = uint16_t;

class ShapeTable {
 public:
  ShapeId intern(std::span<const ShapeKey> keys);
  std::span<const ShapeKey> get(ShapeId id) const {
    return {keys_.data() + begin_[id], keys_.data() + begin_[id + 1]};
  }
  size_t size() const { return begin_.size() - 1; }
  ShapeTable() { begin_.push_back(0); }

 private:
  std::vector<ShapeKey> keys_;
  std::vector<uint32_t> begin_;
  // Entries whose layouts change from one to the next looked through every
  // layout before (rows x layouts: 16,000 layouts, 64,000 rows took 2.6 s).
  IdSlots index_;
};

namespace detail {
// Memory for a column. Columns of a few MiB and more are 2 MiB-aligned and,
// where the engine may use many threads, asked to be backed by transparent
// huge pages: filling 60 MB of columns otherwise takes 15,000 page faults,
// which many threads take in turn (tables.cpp says when it pays).
void* column_alloc(size_t bytes);
void column_free(void* p, size_t bytes) noexcept;
}  // namespace detail

// An allocator whose resize() leaves new elements uninitialised: columns
// sized for every row at once, then filled in place by several threads,
// are not first zeroed (and paged in) by one.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() noexcept = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::column_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { detail::column_free(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using Column = std::vector<T, UninitAllocator<T>>;

// What a trace column holds, by the field's kind (trace_fields.h).
template <TraceKind K>
using TraceCell =
    std::conditional_t<K == TraceKind::Action, Action,
                       std::conditional_t<K == TraceKind::Int, int64_t,
                                          std::conditional_t<K == TraceKind::Str, StrId, StackId>>>;
// A field's value as a reader decodes it: as the column holds it, but the
// action as its string (which Action it is is looked up once per string).
template <TraceKind K>
using TraceValue = std::conditional_t<K == TraceKind::Action, StrId, TraceCell<K>>;

// One trace entry's values as a reader decodes them; a key the entry lacks
// reads 0.
struct TraceEntry {
#define MEMSIGHT_TRACE_VALUE(Name, key, column, Kind) TraceValue<TraceKind::Kind> column = 0;
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_VALUE)
#undef MEMSIGHT_TRACE_VALUE
};

// Every trace entry of every device, in columns (one per field of
// trace_fields.h); device d owns rows [device_begin[d], device_begin[d+1]).
struct TraceTable {
#define MEMSIGHT_TRACE_COLUMN(Name, key, column, Kind) Column<TraceCell<TraceKind::Kind>> column;
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_COLUMN)
#undef MEMSIGHT_TRACE_COLUMN
  Column<ShapeId> shape;
  // Rows with Action::Other: the action string.
  std::unordered_map<uint32_t, StrId> action_name;
  // Rows whose shape has Extra keys: their values, in shape order.
  std::unordered_map<uint32_t, std::vector<PyValue>> extras;

  size_t rows() const { return action.size(); }
  void reserve(size_t n);
  void resize(size_t n);  // new rows are uninitialised (see Column)
  // Appends an entry; `a` is the Action of its action string.
  void push_back_row(Action a, const TraceEntry& e, ShapeId layout) {
#define MEMSIGHT_TRACE_PUSH(Name, key, column, Kind) \
  column.push_back(cell<TraceKind::Kind>(e.column, a));
    MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_PUSH)
#undef MEMSIGHT_TRACE_PUSH
    shape.push_back(layout);
  }
  // Appends row r of `from`, with its action string and extra values.
  void append_row(const TraceTable& from, uint32_t r);

 private:
  template <TraceKind K>
  static TraceCell<K> cell([[maybe_unused]] TraceValue<K> v, [[maybe_unused]] Action a) {
    if constexpr (K == TraceKind::Action)
      return a;
    else
      return v;
  }
};

enum class BlockState : uint8_t { ActiveAllocated, ActivePendingFree, Inactive, Other };

struct Block {
  int64_t address = 0;
  int64_t size = 0;
  int64_t requested_size = 0;
  BlockState state = BlockState::Inactive;
  StrId state_name = 0;
  StackId stack = 0;
  ShapeId shape = 0;
  uint32_t extra = 0;  // 0: none; else 1 + index into Snapshot::extras (values in shape order)
};

struct Segment {
  int64_t device = 0;
  int64_t address = 0;
  int64_t total_size = 0;
  int64_t allocated_size = 0;
  int64_t active_size = 0;
  int64_t requested_size = 0;
  int64_t stream = 0;
  StrId segment_type = 0;
  int64_t pool_id[2] = {0, 0};
  bool is_expandable = false;
  StackId stack = 0;
  uint32_t block_begin = 0, block_end = 0;  // into Snapshot::blocks
  ShapeId shape = 0;
  uint32_t extra = 0;  // as Block::extra
};

class DeviceDicts;   // model/device_dicts.h
class SegmentIndex;  // model/segment_index.h

// What is built from a snapshot on first use and kept for later users (an
// analysis run device by device). A copy starts without it: the copy may be
// changed before it is used.
template <class T>
struct BuiltOnce {
  BuiltOnce() = default;
  BuiltOnce(const BuiltOnce&) {}
  BuiltOnce& operator=(const BuiltOnce&) {
    index.reset();
    return *this;
  }
  std::mutex mutex;
  std::shared_ptr<const T> index;
};

struct Snapshot {
  StringTable strings;
  FrameTable frames;
  ShapeTable shapes;
  std::vector<Segment> segments;
  std::vector<Block> blocks;
  TraceTable trace;
  std::vector<uint32_t> device_begin{0};  // device_count()+1 offsets into trace rows
  // Extra-key values of segments and blocks (see Block::extra).
  std::vector<std::vector<PyValue>> extras;
  // Top-level keys other than segments/device_traces, in order, verbatim
  // (allocator_settings, external_annotations, host_segments, ...).
  std::vector<std::pair<std::string, PyValue>> top_level;
  // Original top-level key order, including "segments" and "device_traces".
  std::vector<std::string> top_keys;
  // The file was a bare list of segments (memory_snapshot() output).
  bool legacy_segment_list = false;
  // Read with ReadScope::SegmentsOnly: the trace was checked, not decoded,
  // so `trace` is empty whatever the file held.
  bool trace_skipped = false;

  size_t device_count() const { return device_begin.size() - 1; }
  std::pair<uint32_t, uint32_t> device_rows(size_t d) const {
    return {device_begin[d], device_begin[d + 1]};
  }
  std::span<const Block> segment_blocks(const Segment& s) const {
    return {blocks.data() + s.block_begin, blocks.data() + s.block_end};
  }
  // The value of a top-level key, or null; a lookup (many devices each
  // asked for a few keys of a file that has a million).
  const PyValue* top(std::string_view key) const;
  std::string_view str(StrId id) const { return strings.get(id); }
  // Top-level lists of dicts by the device each names, built on first use
  // (thread-safe): external_annotations, memsight_device_memory and
  // memsight_tags' storages.
  const DeviceDicts& annotations() const;
  const DeviceDicts& device_memory() const;
  const DeviceDicts& storage_tags() const;
  // `segments` by device, built on first use (thread-safe).
  const SegmentIndex& segments_by_device() const;

 private:
  mutable BuiltOnce<DeviceDicts> annotations_, device_memory_, storage_tags_;
  mutable BuiltOnce<SegmentIndex> segments_by_device_;
  // top_level's keys, and how many there were when indexed (the list only
  // grows after reading; a longer one is indexed again).
  struct TopIndex {
    IdSlots slots;
    size_t size = 0;
  };
  mutable BuiltOnce<TopIndex> top_index_;
};

// The Python dicts the model was read from, rebuilt (for repr and for keys
// the model keeps verbatim).
PyValue frame_to_pyvalue(const Snapshot& snap, FrameId f);
PyValue stack_to_pyvalue(const Snapshot& snap, StackId s);
PyValue row_to_pyvalue(const Snapshot& snap, uint32_t row);
PyValue block_to_pyvalue(const Snapshot& snap, const Block& b);
PyValue segment_to_pyvalue(const Snapshot& snap, const Segment& s);
// Whether a dict of this shape carried the key stored in `field`.
bool shape_has(const Snapshot& snap, ShapeId shape, Field field);

}  // namespace memsight
