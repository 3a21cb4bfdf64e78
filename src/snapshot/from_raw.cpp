// Raw allocator snapshot (flat arrays from the native dumper) -> model.
// Key order follows torch's own snapshot (torch 2.11, checked against
// torch.cuda.memory._snapshot() of the same state by tests/gpu):
//
//   segment  device address total_size allocated_size active_size
//            requested_size stream segment_type segment_pool_id is_expandable
//            then frames [] and blocks, or, when a stack was recorded, blocks
//            and then frames (torch fills them in after symbolizing)
//   block    address size requested_size state frames
//   entry    action addr|device_free size stream time_us [compile_context
//            user_metadata] [frames, when a stack was recorded]
//   top      segments device_traces allocator_settings [external_annotations]
#include "memsight/from_raw.h"

#include <string>
#include <vector>

#include "memsight/error.h"
#include "model/torch_shapes.h"
#include "raw_snapshot.h"

namespace memsight {
namespace {

class FromRaw {
 public:
  FromRaw(const memsight_raw_snapshot& raw, Snapshot& snap) : raw_(raw), snap_(snap) {}

  void run() {
    if (raw_.abi != MEMSIGHT_RAW_SNAPSHOT_ABI)
      throw Error("raw snapshot of ABI " + std::to_string(raw_.abi) + ", expected " +
                  std::to_string(MEMSIGHT_RAW_SNAPSHOT_ABI));
    strings();
    frames();
    segments();
    entries();
    snap_.top_keys = {"segments", "device_traces", "allocator_settings"};
    snap_.top_level.emplace_back("allocator_settings", settings());
    if (raw_.has_annotations) {
      snap_.top_keys.push_back("external_annotations");
      snap_.top_level.emplace_back("external_annotations", annotations());
    }
  }

 private:
  // The arrays' action numbers.
  static constexpr Action kActions[] = {
      Action::Alloc,        Action::FreeRequested, Action::FreeCompleted,
      Action::SegmentAlloc, Action::SegmentFree,   Action::SegmentMap,
      Action::SegmentUnmap, Action::Snapshot,      Action::Oom};

  void check(bool ok, const char* what) {
    if (!ok) throw Error(std::string("inconsistent raw snapshot: ") + what);
  }

  void strings() {
    check(raw_.n_strings >= 1 && raw_.string_offsets[0] == 0, "string table");
    ids_.resize(raw_.n_strings);
    for (uint32_t i = 0; i < raw_.n_strings; ++i) {
      uint64_t b = raw_.string_offsets[i], e = raw_.string_offsets[i + 1];
      check(b <= e, "string offsets");
      ids_[i] = snap_.strings.intern({raw_.string_bytes + b, static_cast<size_t>(e - b)});
    }
  }
  StrId s(uint32_t id) {
    check(id < ids_.size(), "string id");
    return ids_[id];
  }
  std::string_view text(uint32_t id) { return snap_.str(s(id)); }

  void frames() {
    frame_ids_.resize(raw_.n_frames);
    for (uint32_t i = 0; i < raw_.n_frames; ++i) {
      const msr_frame& f = raw_.frames[i];
      frame_ids_[i] = snap_.frames.intern_frame({s(f.name), s(f.filename), f.line, 0});
    }
    check(raw_.n_stacks >= 1, "stack table");
    stack_ids_.assign(raw_.n_stacks, 0);
    std::vector<FrameId> fs;
    for (uint32_t i = 1; i < raw_.n_stacks; ++i) {
      uint32_t b = raw_.stack_offsets[i], e = raw_.stack_offsets[i + 1];
      check(b <= e, "stack offsets");
      fs.clear();
      for (uint32_t k = b; k < e; ++k) {
        check(raw_.stack_frames[k] < frame_ids_.size(), "frame id");
        fs.push_back(frame_ids_[raw_.stack_frames[k]]);
      }
      stack_ids_[i] = snap_.frames.intern_stack(fs);
    }
  }
  StackId stack(uint32_t id) {
    check(id < stack_ids_.size(), "stack id");
    return stack_ids_[id];
  }

  ShapeId shape(const std::vector<std::pair<const char*, Field>>& keys) {
    std::vector<ShapeKey> v;
    for (auto& [k, f] : keys) v.push_back({snap_.strings.intern(k), f});
    return snap_.shapes.intern(v);
  }

  void segments() {
    const TorchSegmentShapes t(snap_);
    snap_.segments.reserve(raw_.n_segments);
    snap_.blocks.reserve(raw_.n_blocks);
    for (uint32_t i = 0; i < raw_.n_segments; ++i) {
      const msr_segment& r = raw_.segments[i];
      check(r.block_begin <= r.block_end && r.block_end <= raw_.n_blocks, "block range");
      Segment seg;
      seg.device = r.device;
      seg.address = r.address;
      seg.total_size = r.total_size;
      seg.allocated_size = r.allocated_size;
      seg.active_size = r.active_size;
      seg.requested_size = r.requested_size;
      seg.stream = r.stream;
      seg.segment_type = r.is_large ? t.large : t.small;
      seg.pool_id[0] = static_cast<int64_t>(r.pool_id[0]);
      seg.pool_id[1] = static_cast<int64_t>(r.pool_id[1]);
      seg.is_expandable = r.is_expandable;
      seg.stack = stack(r.stack);
      seg.shape = r.has_context ? t.with_stack : t.without_stack;
      seg.block_begin = static_cast<uint32_t>(snap_.blocks.size());
      int64_t address = r.address;
      for (uint32_t k = r.block_begin; k < r.block_end; ++k) {
        const msr_block& rb = raw_.blocks[k];
        check(rb.state <= MSR_INACTIVE, "block state");
        Block b;
        b.address = address;
        b.size = rb.size;
        b.requested_size = rb.requested_size;
        b.state = rb.state == MSR_ACTIVE_ALLOCATED      ? BlockState::ActiveAllocated
                  : rb.state == MSR_ACTIVE_PENDING_FREE ? BlockState::ActivePendingFree
                                                        : BlockState::Inactive;
        b.state_name = t.states[rb.state];
        b.stack = stack(rb.stack);
        b.shape = t.block;
        address += rb.size;
        snap_.blocks.push_back(b);
      }
      seg.block_end = static_cast<uint32_t>(snap_.blocks.size());
      snap_.segments.push_back(seg);
    }
  }

  void entries() {
    // Shapes by (oom?, stack recorded?): the trace fields in torch's order
    // (trace_fields.h), those this torch writes.
    ShapeId shapes[2][2];
    for (int oom = 0; oom < 2; ++oom)
      for (int ctx = 0; ctx < 2; ++ctx) {
        std::vector<ShapeKey> v;
        for (size_t i = 0; i < kTraceFieldCount; ++i) {
          Field f = kTraceFields[i];
          bool written = f == Field::CompileContext ? raw_.has_compile_context
                         : f == Field::UserMetadata ? raw_.has_user_metadata
                         : f == Field::Frames       ? ctx
                                                    : true;
          std::string_view key = f == Field::Addr && oom ? kDeviceFreeKey : kTraceKeys[i];
          if (written) v.push_back({snap_.strings.intern(key), f});
        }
        shapes[oom][ctx] = snap_.shapes.intern(v);
      }
    check(raw_.n_devices < (1u << 20) && raw_.device_offsets[0] == 0, "device offsets");
    const uint64_t n = raw_.device_offsets[raw_.n_devices];
    check(n < UINT32_MAX, "entry count");
    TraceTable& t = snap_.trace;
    t.resize(n);
    snap_.device_begin.assign(1, 0);
    for (uint32_t d = 0; d < raw_.n_devices; ++d) {
      check(raw_.device_offsets[d] <= raw_.device_offsets[d + 1], "device offsets");
      snap_.device_begin.push_back(static_cast<uint32_t>(raw_.device_offsets[d + 1]));
    }
    for (uint64_t i = 0; i < n; ++i) {
      const msr_entry& e = raw_.entries[i];
      check(e.action < std::size(kActions), "entry action");
#define MEMSIGHT_RAW_CELL(Name, key, column, Kind) t.column[i] = cell<TraceKind::Kind>(e.column);
      MEMSIGHT_TRACE_FIELDS(MEMSIGHT_RAW_CELL)
#undef MEMSIGHT_RAW_CELL
      t.shape[i] = shapes[e.action == 8][e.has_context ? 1 : 0];
    }
  }

  // An entry's value as its trace column holds it (trace_fields.h): the
  // arrays' ids become the model's.
  template <TraceKind K>
  TraceCell<K> cell(auto v) {
    if constexpr (K == TraceKind::Action)
      return kActions[v];  // checked by entries()
    else if constexpr (K == TraceKind::Int)
      return v;
    else if constexpr (K == TraceKind::Str)
      return s(v);
    else
      return stack(v);
  }

  PyValue settings() {
    const msr_settings& c = raw_.settings;
    PyValue d = PyValue::dict();
    d.set("PYTORCH_CUDA_ALLOC_CONF", PyValue::str(text(c.alloc_conf)));
    d.set("max_split_size", PyValue::integer(c.max_split_size));
    d.set("garbage_collection_threshold", PyValue::real(c.garbage_collection_threshold));
    d.set("expandable_segments", PyValue::boolean(c.expandable_segments));
    d.set("pinned_num_register_threads", PyValue::integer(c.pinned_num_register_threads));
    d.set("release_lock_on_cudamalloc", PyValue::boolean(c.release_lock_on_cudamalloc));
    d.set("pinned_use_cuda_host_register", PyValue::boolean(c.pinned_use_cuda_host_register));
    if (raw_.has_graph_capture_record_stream_reuse)
      d.set("graph_capture_record_stream_reuse",
            PyValue::boolean(c.graph_capture_record_stream_reuse));
    PyValue div = PyValue::dict();
    int64_t key = 1;
    for (uint32_t i = 0; i < c.n_divisions; ++i, key *= 2)
      div.set(std::to_string(key), PyValue::integer(c.divisions[i]));
    d.set("roundup_power2_divisions", std::move(div));
    return d;
  }

  PyValue annotations() {
    PyValue list = PyValue::list();
    for (uint32_t i = 0; i < raw_.n_annotations; ++i) {
      const msr_annotation& a = raw_.annotations[i];
      check(a.kv_begin <= a.kv_end, "annotation range");
      PyValue d = PyValue::dict();
      for (uint32_t k = a.kv_begin; k < a.kv_end; ++k)
        d.set(text(raw_.annotation_kv[2 * k]), PyValue::str(text(raw_.annotation_kv[2 * k + 1])));
      d.set("device", PyValue::integer(a.device));
      d.set("time_us", PyValue::integer(a.time_us));
      list.items.push_back(std::move(d));
    }
    return list;
  }

  const memsight_raw_snapshot& raw_;
  Snapshot& snap_;
  std::vector<StrId> ids_;
  std::vector<FrameId> frame_ids_;
  std::vector<StackId> stack_ids_;
};

}  // namespace

Snapshot snapshot_from_raw(const memsight_raw_snapshot& raw) {
  Snapshot snap;
  FromRaw(raw, snap).run();
  return snap;
}

}  // namespace memsight
