// The values the model keeps verbatim (unknown keys, top-level values),
// made from the unpickler's values with the sharing pickle.loads would show.
#include "snapshot/builder.h"

namespace memsight::build {

// Python reads a value that holds itself; the model cannot keep one, and
// calls it what it is to a walk of it: too deep.
constexpr const char* kTooDeep = "corrupted pickle: values nested deeper than 1000 levels";

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
  if (depth > kMaxDepth) throw Error(kTooDeep);
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
        if (d.making) throw Error(kTooDeep);
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
  // A container met again while it is being made holds itself: refused at
  // once. Waiting for the depth limit would make the values around the loop
  // anew on every turn (each a copy: a frames list holding the root dict
  // held gigabytes before the thousandth level).
  if (v.is_node() && !making_.insert(v.bits).second) throw Error(kTooDeep);
  PyValue p;
  try {
    p = make(vm, v, depth);
  } catch (...) {
    making_.erase(v.bits);
    throw;
  }
  if (v.is_node()) making_.erase(v.bits);
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
      p = row_value(vm, v.idx(), depth);
      break;
    default:
      break;
  }
  return p;
}

// A trace entry kept as a value (under an unknown key) holds the frames
// list it read through the memo (which another key may hold too), else the
// one every holder of its stack shares: a list under another key stays one
// list. Written back, the entry reads that list through the memo again and
// so into the same sharing (a fresh list here made the second write differ).
PyValue Builder::row_value(Unpickler& vm, uint32_t row, int depth) {
  PyValue p = row_to_pyvalue(snap_, row);
  size_t pair = 0;  // one (key, value) pair per key of the shape
  for (const ShapeKey& k : snap_.shapes.get(snap_.trace.shape[row])) {
    if (k.field == Field::Frames) {
      auto it = frames_node_.find(row);
      const Val frames = it != frames_node_.end()
                             ? Val{it->second}
                             : Val::make(Val::StackRef, snap_.trace.stack[row]);
      p.items.at_mut(2 * pair + 1) = materialize(vm, frames, depth + 1);
      break;
    }
    ++pair;
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

}  // namespace memsight::build
