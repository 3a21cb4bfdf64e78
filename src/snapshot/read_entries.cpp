// Trace entries the row lane left to the generic path (their dicts, as
// they stream in, or at the end), and the device lists that hold the rows.
#include "snapshot/builder.h"

namespace memsight::build {

// A trace entry's dict into a row: each key with a value of its field's
// kind into the field, the rest verbatim (Extra). Hot where the row lane
// cannot take a file's entries: runs once per trace entry, so the row is built in locals and pushed
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
    // A frames list read through the memo may have other holders: a value
    // made of this row holds that list (row_value), not a copy.
    if (f == Field::Frames && items[2 * i + 1].is_node() && vm.node(items[2 * i + 1]).gets > 0)
      frames_node_[row] = items[2 * i + 1].bits;
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
      } else if (e.tag() == Val::FrameRef) {
        throw NeedsExactRead{};  // an entry whose keys look like a frame's, converted as one
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

}  // namespace memsight::build
