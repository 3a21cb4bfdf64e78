// Segments and their blocks, converted once the pickle has ended.
#include "memsight/error.h"
#include "snapshot/builder.h"

namespace memsight::build {

// A dict's items into typed fields (`field_of(key, value)` says which,
// having stored the value) and the rest, kept verbatim in Snapshot::extras
// (`extra`: 1 + their index, 0: none). Returns the dict's shape.
template <class FieldOf>
ShapeId Builder::read_dict(Unpickler& vm, std::span<const Val> items, FieldOf field_of,
                           uint32_t& extra) {
  std::vector<ShapeKey> shape;
  std::vector<PyValue> extras;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    Val k = items[i];
    StrId key = k.tag() == Val::Str ? k.idx() : 0;
    Field f = k.tag() == Val::Str ? field_of(key, items[i + 1]) : Field::Extra;
    if (f == Field::Extra)
      extras.push_back(k.tag() == Val::Str
                           ? materialize(vm, items[i + 1])
                           : PyValue::tuple({materialize(vm, k), materialize(vm, items[i + 1])}));
    shape.push_back({key, f});
  }
  if (!extras.empty()) {
    snap_.extras.push_back(std::move(extras));
    extra = static_cast<uint32_t>(snap_.extras.size());
  }
  return snap_.shapes.intern(shape);
}

void Builder::convert_segments(Unpickler& vm, Val list) {
  list = vm.resolve(list);
  if (list.tag() != Val::List)
    throw Error("not a memory snapshot: 'segments' is " + type_name(list) + ", expected a list");
  const auto segs = vm.list_items(list);
  for (size_t si = 0; si < segs.size(); ++si) {
    Val sv = vm.resolve(segs[si]);
    // A segment or block whose keys look like a frame's or a trace entry's
    // was converted as one while it streamed in: only the read that converts
    // nothing before the end sees the dict it is.
    if (converted_as_other(sv)) throw NeedsExactRead{};
    if (sv.tag() != Val::Dict)
      throw Error("not a memory snapshot: segments[" + std::to_string(si) + "] is " +
                  type_name(sv) + ", expected a dict");
    Val blocks{};
    Segment seg = convert_segment(vm, sv, blocks);
    seg.block_begin = static_cast<uint32_t>(snap_.blocks.size());
    if (blocks.tag() == Val::List) {
      // A block's address, when it has none, follows the one before.
      int64_t running = seg.address;
      const auto bl = vm.list_items(blocks);
      for (size_t bi = 0; bi < bl.size(); ++bi) {
        Val bv = vm.resolve(bl[bi]);
        if (converted_as_other(bv)) throw NeedsExactRead{};
        if (bv.tag() != Val::Dict)
          throw Error("not a memory snapshot: segments[" + std::to_string(si) + "]['blocks'][" +
                      std::to_string(bi) + "] is " + type_name(bv) + ", expected a dict");
        Block b;
        b.address = running;
        b.shape = read_dict(
            vm, python_dict_items(vm.node(bv).items),
            [&](StrId key, Val raw) { return block_field(vm, key, raw, b); }, b.extra);
        running = b.address + b.size;
        snap_.blocks.push_back(b);
      }
    }
    seg.block_end = static_cast<uint32_t>(snap_.blocks.size());
    snap_.segments.push_back(seg);
  }
}

// A segment's own keys; its blocks' list is left in `blocks`.
Segment Builder::convert_segment(Unpickler& vm, Val dict, Val& blocks) {
  Segment seg;
  seg.shape = read_dict(
      vm, python_dict_items(vm.node(dict).items),
      [&](StrId key, Val raw) { return segment_field(vm, key, raw, seg, blocks); }, seg.extra);
  return seg;
}

Field Builder::segment_field(Unpickler& vm, StrId key, Val raw, Segment& seg, Val& blocks) {
  Val v = vm.resolve(raw);
  auto int_field = [&](Field f, int64_t& dst) {
    if (!is_int(v)) return Field::Extra;
    dst = v.as_int();
    return f;
  };
  switch (key) {
    case kDevice:
      return int_field(Field::Device, seg.device);
    case kAddress:
      return int_field(Field::Address, seg.address);
    case kTotalSize:
      return int_field(Field::TotalSize, seg.total_size);
    case kAllocatedSize:
      return int_field(Field::AllocatedSize, seg.allocated_size);
    case kActiveSize:
      return int_field(Field::ActiveSize, seg.active_size);
    case kRequestedSize:
      return int_field(Field::RequestedSize, seg.requested_size);
    case kStream:
      return int_field(Field::Stream, seg.stream);
    case kSegmentType:
      if (v.tag() != Val::Str) return Field::Extra;
      seg.segment_type = v.idx();
      return Field::SegmentType;
    case kSegmentPoolId: {
      if (v.tag() != Val::Tuple || vm.node(v).items.size() != 2) return Field::Extra;
      Val a = vm.resolve(vm.node(v).items[0]), b = vm.resolve(vm.node(v).items[1]);
      if (!is_int(a) || !is_int(b)) return Field::Extra;
      seg.pool_id[0] = a.as_int();
      seg.pool_id[1] = b.as_int();
      return Field::SegmentPoolId;
    }
    case kIsExpandable:
      if (v.tag() != Val::True && v.tag() != Val::False) return Field::Extra;
      seg.is_expandable = v.tag() == Val::True;
      return Field::IsExpandable;
    case kFrames:
      return to_stack(vm, raw, seg.stack) ? Field::Frames : Field::Extra;
    case kBlocks:
      if (v.tag() != Val::List) return Field::Extra;
      blocks = v;
      return Field::Blocks;
    default:
      return Field::Extra;
  }
}

Field Builder::block_field(Unpickler& vm, StrId key, Val raw, Block& b) {
  Val v = vm.resolve(raw);
  switch (key) {
    case kAddress:
      if (!is_int(v)) return Field::Extra;
      b.address = v.as_int();
      return Field::Address;
    case kSize:
      if (!is_int(v)) return Field::Extra;
      b.size = v.as_int();
      return Field::Size;
    case kRequestedSize:
      if (!is_int(v)) return Field::Extra;
      b.requested_size = v.as_int();
      return Field::RequestedSize;
    case kState: {
      if (v.tag() != Val::Str) return Field::Extra;
      b.state_name = v.idx();
      auto s = snap_.str(v.idx());
      b.state = s == "active_allocated"      ? BlockState::ActiveAllocated
                : s == "active_pending_free" ? BlockState::ActivePendingFree
                : s == "inactive"            ? BlockState::Inactive
                                             : BlockState::Other;
      return Field::State;
    }
    case kFrames:
      return to_stack(vm, raw, b.stack) ? Field::Frames : Field::Extra;
    default:
      return Field::Extra;
  }
}

}  // namespace memsight::build
