// Model -> Python values, key order and unknown keys as they were read.
#include "memsight/snapshot.h"

namespace memsight {

PyValue frame_to_pyvalue(const Snapshot& snap, FrameId id) {
  const Frame& f = snap.frames.frame(id);
  if (f.extra) return snap.frames.extras[f.extra - 1];
  PyValue d = PyValue::dict();
  d.items = {PyValue::str("name"),     PyValue::str(snap.str(f.name)),
             PyValue::str("filename"), PyValue::str(snap.str(f.filename)),
             PyValue::str("line"),     PyValue::integer(f.line)};
  return d;
}

PyValue stack_to_pyvalue(const Snapshot& snap, StackId s) {
  PyValue l = PyValue::list();
  for (FrameId f : snap.frames.stack(s)) l.items.push_back(frame_to_pyvalue(snap, f));
  return l;
}

bool shape_has(const Snapshot& snap, ShapeId shape, Field field) {
  for (const ShapeKey& k : snap.shapes.get(shape))
    if (k.field == field) return true;
  return false;
}

namespace {
// Appends key and value for an Extra slot; non-string keys were kept as a
// (key, value) tuple.
void put_extra(PyValue& d, StrId key, const PyValue& v, const Snapshot& snap) {
  if (key == 0 && v.kind == PyValue::Kind::Tuple && v.items.size() == 2) {
    d.items.push_back(v.items[0]);
    d.items.push_back(v.items[1]);
  } else {
    d.items.push_back(PyValue::str(snap.str(key)));
    d.items.push_back(v);
  }
}

// A trace entry's value, by its field's kind (trace_fields.h).
template <TraceKind K>
PyValue cell_to_pyvalue(const Snapshot& snap, uint32_t row, TraceCell<K> v) {
  if constexpr (K == TraceKind::Action) {
    auto it = snap.trace.action_name.find(row);
    return PyValue::str(it != snap.trace.action_name.end() ? snap.str(it->second) : action_name(v));
  } else if constexpr (K == TraceKind::Int) {
    return PyValue::integer(v);
  } else if constexpr (K == TraceKind::Str) {
    return PyValue::str(snap.str(v));
  } else {
    return stack_to_pyvalue(snap, v);
  }
}
}  // namespace

PyValue row_to_pyvalue(const Snapshot& snap, uint32_t r) {
  const TraceTable& t = snap.trace;
  PyValue d = PyValue::dict();
  const std::vector<PyValue>* extras = nullptr;
  if (auto it = t.extras.find(r); it != t.extras.end()) extras = &it->second;
  size_t xi = 0;
  for (const ShapeKey& k : snap.shapes.get(t.shape[r])) {
    PyValue v;
    switch (k.field) {
#define MEMSIGHT_PY_CASE(Name, key, column, Kind)               \
  case Field::Name:                                             \
    v = cell_to_pyvalue<TraceKind::Kind>(snap, r, t.column[r]); \
    break;
      MEMSIGHT_TRACE_FIELDS(MEMSIGHT_PY_CASE)
#undef MEMSIGHT_PY_CASE
      default:
        put_extra(d, k.key, (*extras)[xi++], snap);
        continue;
    }
    d.items.push_back(PyValue::str(snap.str(k.key)));
    d.items.push_back(std::move(v));
  }
  return d;
}

PyValue block_to_pyvalue(const Snapshot& snap, const Block& b) {
  PyValue d = PyValue::dict();
  size_t xi = 0;
  for (const ShapeKey& k : snap.shapes.get(b.shape)) {
    PyValue v;
    switch (k.field) {
      case Field::Address:
        v = PyValue::integer(b.address);
        break;
      case Field::Size:
        v = PyValue::integer(b.size);
        break;
      case Field::RequestedSize:
        v = PyValue::integer(b.requested_size);
        break;
      case Field::State:
        v = PyValue::str(snap.str(b.state_name));
        break;
      case Field::Frames:
        v = stack_to_pyvalue(snap, b.stack);
        break;
      default:
        put_extra(d, k.key, snap.extras[b.extra - 1][xi++], snap);
        continue;
    }
    d.items.push_back(PyValue::str(snap.str(k.key)));
    d.items.push_back(std::move(v));
  }
  return d;
}

PyValue segment_to_pyvalue(const Snapshot& snap, const Segment& s) {
  PyValue d = PyValue::dict();
  size_t xi = 0;
  for (const ShapeKey& k : snap.shapes.get(s.shape)) {
    PyValue v;
    switch (k.field) {
      case Field::Device:
        v = PyValue::integer(s.device);
        break;
      case Field::Address:
        v = PyValue::integer(s.address);
        break;
      case Field::TotalSize:
        v = PyValue::integer(s.total_size);
        break;
      case Field::AllocatedSize:
        v = PyValue::integer(s.allocated_size);
        break;
      case Field::ActiveSize:
        v = PyValue::integer(s.active_size);
        break;
      case Field::RequestedSize:
        v = PyValue::integer(s.requested_size);
        break;
      case Field::Stream:
        v = PyValue::integer(s.stream);
        break;
      case Field::SegmentType:
        v = PyValue::str(snap.str(s.segment_type));
        break;
      case Field::SegmentPoolId:
        v = PyValue::tuple({PyValue::integer(s.pool_id[0]), PyValue::integer(s.pool_id[1])});
        break;
      case Field::IsExpandable:
        v = PyValue::boolean(s.is_expandable);
        break;
      case Field::Frames:
        v = stack_to_pyvalue(snap, s.stack);
        break;
      case Field::Blocks: {
        v = PyValue::list();
        for (const Block& b : snap.segment_blocks(s)) v.items.push_back(block_to_pyvalue(snap, b));
        break;
      }
      default:
        put_extra(d, k.key, snap.extras[s.extra - 1][xi++], snap);
        continue;
    }
    d.items.push_back(PyValue::str(snap.str(k.key)));
    d.items.push_back(std::move(v));
  }
  return d;
}

}  // namespace memsight
