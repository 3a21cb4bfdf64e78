// Model -> protocol-4 pickle that pickle.load turns back into the dicts torch
// wrote. Layout of what we emit:
//
//   PROTO 4, then FRAMEs of ~64 KiB (as Python's pickler cuts them), each
//   closed before a segment, block or trace entry
//   EMPTY_DICT                                  top-level dict
//     MARK 'segments' [segments...] 'device_traces' [[entries...]...] ... SETITEMS
//   entry:  EMPTY_DICT MEMOIZE MARK key value ... SETITEMS
//   frames: a list per stack, memoised, so identical stacks share one object
//           (as torch's de-duplicated tracebacks do); frame dicts memoised too.
//
// Strings are memoised on first use and read back with BINGET afterwards.
#include "input/source.h"
#include "memsight/reader.h"
#include "snapshot/pickler.h"

namespace memsight {
namespace write {

std::string Pickler::run() {
  count_shared();
  out_.reserve(1 << 20);
  op(0x80);
  op(4);
  open_frame();
  if (snap_.legacy_segment_list || segments_only_) {
    segments();
  } else {
    op('}');
    op('(');
    size_t n = 0;
    for (const std::string& k : snap_.top_keys) {
      flush_batch(n);
      str(k);
      if (k == "segments") {
        segments();
      } else if (k == "device_traces") {
        traces();
      } else if (const PyValue* v = snap_.top(k)) {
        value(*v);
      } else {
        op('N');
      }
    }
    if (snap_.top_keys.empty()) {  // a model built in code
      str("segments");
      segments();
      str("device_traces");
      traces();
    }
    op('u');
  }
  op('.');
  close_frame();
  return std::move(out_);
}

void Pickler::frame(FrameId id) {
  const uint64_t key = frame_key(id);
  auto it = frame_memo_.find(key);
  if (it != frame_memo_.end()) return memo_get(it->second);
  const Frame& f = snap_.frames.frame(id);
  if (f.extra) {
    value(snap_.frames.extras[f.extra - 1]);
    frame_memo_.emplace(key, memoize());
    return;
  }
  // Memoise the dict before its items, as Python does.
  op('}');
  frame_memo_.emplace(key, memoize());
  op('(');
  str("name");
  str(f.name);
  str("filename");
  str(f.filename);
  str("line");
  integer(f.line);
  op('u');
}

void Pickler::stack(StackId id) {
  const uint32_t key = stack_key(id);
  auto it = stack_memo_.find(key);
  if (it != stack_memo_.end()) return memo_get(it->second);
  op(']');
  auto frames = snap_.frames.stack(id);
  // Memoise the list before its items, as Python does.
  uint32_t slot = memoize();
  if (!frames.empty()) {
    op('(');
    size_t n = 0;
    for (FrameId f : frames) {
      flush_batch(n, 'e');
      frame(f);
    }
    op('e');
  }
  stack_memo_.emplace(key, slot);
}

void Pickler::extra_pair(StrId key, const PyValue& v) {
  if (key == 0 && v.kind == PyValue::Kind::Tuple && v.items.size() == 2) {
    value(v.items[0]);
    value(v.items[1]);
  } else {
    str(key);
    value(v);
  }
}

void Pickler::segments() {
  op(']');
  if (snap_.segments.empty()) return;
  op('(');
  size_t n = 0;
  for (const Segment& s : snap_.segments) {
    flush_batch(n, 'e');
    frame_boundary();
    op('}');
    memoize();
    op('(');
    size_t xi = 0;
    for (const ShapeKey& k : snap_.shapes.get(s.shape)) {
      if (k.field == Field::Extra) {
        extra_pair(k.key, snap_.extras[s.extra - 1][xi++]);
        continue;
      }
      str(k.key);
      switch (k.field) {
        case Field::Device:
          integer(s.device);
          break;
        case Field::Address:
          integer(s.address);
          break;
        case Field::TotalSize:
          integer(s.total_size);
          break;
        case Field::AllocatedSize:
          integer(s.allocated_size);
          break;
        case Field::ActiveSize:
          integer(s.active_size);
          break;
        case Field::RequestedSize:
          integer(s.requested_size);
          break;
        case Field::Stream:
          integer(s.stream);
          break;
        case Field::SegmentType:
          str(s.segment_type);
          break;
        case Field::SegmentPoolId:
          integer(s.pool_id[0]);
          integer(s.pool_id[1]);
          op(0x86);
          break;
        case Field::IsExpandable:
          op(s.is_expandable ? 0x88 : 0x89);
          break;
        case Field::Frames:
          stack(s.stack);
          break;
        case Field::Blocks:
          blocks(s);
          break;
        default:
          op('N');
          break;
      }
    }
    op('u');
  }
  op('e');
}

void Pickler::blocks(const Segment& s) {
  op(']');
  auto bl = snap_.segment_blocks(s);
  if (bl.empty()) return;
  op('(');
  size_t n = 0;
  for (const Block& b : bl) {
    flush_batch(n, 'e');
    frame_boundary();
    op('}');
    memoize();
    op('(');
    size_t xi = 0;
    for (const ShapeKey& k : snap_.shapes.get(b.shape)) {
      if (k.field == Field::Extra) {
        extra_pair(k.key, snap_.extras[b.extra - 1][xi++]);
        continue;
      }
      str(k.key);
      switch (k.field) {
        case Field::Address:
          integer(b.address);
          break;
        case Field::Size:
          integer(b.size);
          break;
        case Field::RequestedSize:
          integer(b.requested_size);
          break;
        case Field::State:
          str(b.state_name);
          break;
        case Field::Frames:
          stack(b.stack);
          break;
        default:
          op('N');
          break;
      }
    }
    op('u');
  }
  op('e');
}

// A trace entry's value, by its field's kind (trace_fields.h).
template <TraceKind K>
void Pickler::cell(uint32_t row, TraceCell<K> v) {
  if constexpr (K == TraceKind::Action) {
    auto it = snap_.trace.action_name.find(row);
    if (it != snap_.trace.action_name.end())
      str(it->second);
    else
      str(action_name(v));
  } else if constexpr (K == TraceKind::Int) {
    integer(v);
  } else if constexpr (K == TraceKind::Str) {
    str(v);
  } else {
    stack(v);
  }
}

void Pickler::traces() {
  const TraceTable& t = snap_.trace;
  op(']');
  if (snap_.device_count() == 0) return;
  op('(');
  size_t nd = 0;
  for (size_t d = 0; d < snap_.device_count(); ++d) {
    flush_batch(nd, 'e');
    auto [begin, end] = snap_.device_rows(d);
    op(']');
    if (begin == end) continue;
    op('(');
    size_t n = 0;
    for (uint32_t r = begin; r < end; ++r) {
      flush_batch(n, 'e');
      frame_boundary();
      op('}');
      memoize();
      op('(');
      const std::vector<PyValue>* extras = nullptr;
      if (auto it = t.extras.find(r); it != t.extras.end()) extras = &it->second;
      size_t xi = 0;
      for (const ShapeKey& k : snap_.shapes.get(t.shape[r])) {
        if (k.field == Field::Extra) {
          extra_pair(k.key, (*extras)[xi++]);
          continue;
        }
        str(k.key);
        switch (k.field) {
#define MEMSIGHT_WRITE_CASE(Name, key, column, Kind) \
  case Field::Name:                                  \
    cell<TraceKind::Kind>(r, t.column[r]);           \
    break;
          MEMSIGHT_TRACE_FIELDS(MEMSIGHT_WRITE_CASE)
#undef MEMSIGHT_WRITE_CASE
          default:
            op('N');
            break;
        }
      }
      op('u');
    }
    op('e');
  }
  op('e');
}

}  // namespace write

std::string pickle_snapshot(const Snapshot& snap) { return write::Pickler(snap).run(); }
std::string pickle_segments(const Snapshot& snap) { return write::Pickler(snap, true).run(); }

void write_snapshot_file(const Snapshot& snap, const std::string& path, bool force) {
  std::string method = compression_for_name(path);  // refused before any work
  std::string data = pickle_snapshot(snap);
  if (!method.empty()) data = compress(data, method);
  write_file_atomic(path, data, force);
}

}  // namespace memsight
