// Which containers the written pickle holds more than once: written once
// and memoised, read back by later holders.
#include <unordered_set>

#include "snapshot/pickler.h"

namespace memsight::write {

// A container the output holds more than once is written once and
// memoised; later holders read it back, so a 200-byte pickle of nested
// references stays that small. Containers count as one when they say the
// same thing (ValueKeys), whichever values of the model share them: the
// model's sharing depends on how the reader met each value (a frames list
// becomes an interned stack, a frame dict an interned frame, a list read
// before a memo read of it is kept apart), so sharing by it changed from
// one round to the next, a level of sharing a round (tests/fuzz/README.md,
// findings 14 and 15). What the values say survives every round, so
// written by it the output is the same after one. Values equal to what
// pickle.loads gives stay equal; equal containers held apart in the file
// become one, as equal stacks and frames always did. An empty one is
// written each time (one byte, less than a memo read).
//
// Counted before writing, over every value the output holds (top-level
// values, the unknown keys of segments, blocks and trace entries, and the
// frames kept whole that the written stacks name); a shared container's
// items once.
void Pickler::count_shared() {
  std::unordered_set<uint64_t> seen;  // a frame is written once
  auto stack = [&](ShapeId shape, StackId s) {
    if (snap_.frames.extras.empty() || !shape_has(snap_, shape, Field::Frames)) return;
    for (FrameId f : snap_.frames.stack(s))
      if (uint32_t x = snap_.frames.frame(f).extra; x && seen.insert(frame_key(f)).second)
        count(snap_.frames.extras[x - 1]);
  };
  auto segments = [&] {
    for (const auto& xs : snap_.extras)  // of segments and blocks
      for (const PyValue& x : xs) count(x);
    for (const Segment& seg : snap_.segments) {
      stack(seg.shape, seg.stack);
      for (const Block& b : snap_.segment_blocks(seg)) stack(b.shape, b.stack);
    }
  };
  auto traces = [&] {
    for (const auto& [row, xs] : snap_.trace.extras)
      for (const PyValue& x : xs) count(x);
    for (size_t r = 0; r < snap_.trace.rows(); ++r)
      stack(snap_.trace.shape[r], snap_.trace.stack[r]);
  };
  if (snap_.legacy_segment_list || segments_only_) return segments();
  for (const std::string& k : snap_.top_keys) {
    if (k == "segments") {
      segments();
    } else if (k == "device_traces") {
      traces();
    } else if (const PyValue* v = snap_.top(k)) {
      count(*v);
    }
  }
  if (snap_.top_keys.empty()) {
    segments();
    traces();
  }
}

void Pickler::count(const PyValue& v) {
  if (v.kind != PyValue::Kind::List && v.kind != PyValue::Kind::Tuple &&
      v.kind != PyValue::Kind::Dict)
    return;
  if (v.items.empty() || plain_frame(v)) return;
  if (++written_[keys_.of(v)] > 1) return;
  for (const PyValue& item : v.items) count(item);
}

bool Pickler::shared(const PyValue& v) {
  if (v.items.empty()) return false;
  auto it = written_.find(keys_.of(v));
  return it != written_.end() && it->second >= 2;
}

bool Pickler::shared_seen(const PyValue& v) {
  if (!shared(v)) return false;
  auto it = shared_memo_.find(keys_.of(v));
  if (it == shared_memo_.end()) return false;
  memo_get(it->second);
  return true;
}

void Pickler::remember_shared(const PyValue& v) {
  if (shared(v)) shared_memo_.emplace(keys_.of(v), memoize());
}

// A plain frame is interned by what it says, so its id is its key; a frame
// kept whole (another key order, other keys) is keyed by its dict.
uint64_t Pickler::frame_key(FrameId id) {
  uint32_t x = snap_.frames.frame(id).extra;
  if (!x) return id;
  return (uint64_t{1} << 32) | keys_.of(snap_.frames.extras[x - 1]);
}

// A stack is interned by its frames' ids, which is what it says unless a
// frame is kept whole: two such frames with the same dict have two ids.
uint32_t Pickler::stack_key(StackId id) {
  if (snap_.frames.extras.empty()) return id;
  if (stack_keys_.empty()) stack_keys_.assign(snap_.frames.stack_count(), UINT32_MAX);
  uint32_t& key = stack_keys_[id];
  if (key == UINT32_MAX) {
    std::string bytes(1, 'S');
    for (FrameId f : snap_.frames.stack(id)) {
      uint64_t k = frame_key(f);
      bytes.append(reinterpret_cast<const char*>(&k), sizeof k);
    }
    key = keys_.of_sequence(bytes);
  }
  return key;
}

}  // namespace memsight::write
