// Frames and stacks: a frame dict becomes an interned frame, a list of
// them an interned stack, as the pickle streams in.
#include "snapshot/builder.h"

namespace memsight::build {

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
  if (only_frames) {
    // Once the pickle has ended, the dict holding the list (a block) may be
    // held elsewhere too (another segment's value, through the memo) and be
    // made into a value after this: the node must keep its stack, not be
    // recycled as a list only the holder knew.
    if (!streaming_) ++vm.node(v).gets;
    vm.convert_node(v, Val::make(Val::StackRef, out));
  }
  return true;
}

}  // namespace memsight::build
