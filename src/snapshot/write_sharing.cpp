// Which containers the written pickle holds more than once: written once
// and memoised, read back by later holders.
#include "snapshot/pickler.h"

namespace memsight::write {

// A container written more than once (one the model shares: read through
// the memo from the file) is written once and memoised; later holders
// read it back, so a 200-byte pickle of nested references stays that
// small. What counts is how often the output holds it, not how many
// values in the model do: reading the output back then shares exactly
// these again, and writing that gives the same bytes. An empty one is
// written each time (one byte, less than a memo read).
//
// Counted before writing, over every value the output holds (top-level
// values, the unknown keys of segments, blocks and trace entries, and of
// the frames the written stacks name); a shared container's items once.
void Pickler::count_shared() {
  std::vector<bool> seen(snap_.frames.extras.size());  // a frame is written once
  auto stack = [&](ShapeId shape, StackId s) {
    if (seen.empty() || !shape_has(snap_, shape, Field::Frames)) return;
    for (FrameId f : snap_.frames.stack(s))
      if (uint32_t x = snap_.frames.frame(f).extra; x && !seen[x - 1]) {
        seen[x - 1] = true;
        count(snap_.frames.extras[x - 1]);
      }
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
  // In the order and as often as run() writes them.
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
  if (v.items.holders() >= 2 && ++written_[v.items.identity()] > 1) return;
  for (const PyValue& item : v.items) count(item);
}

bool Pickler::shared(const PyValue& v) const {
  if (v.items.empty()) return false;
  auto it = written_.find(v.items.identity());
  return it != written_.end() && it->second >= 2;
}

bool Pickler::shared_seen(const PyValue& v) {
  if (!shared(v)) return false;
  auto it = shared_memo_.find(v.items.identity());
  if (it == shared_memo_.end()) return false;
  memo_get(it->second);
  return true;
}

void Pickler::remember_shared(const PyValue& v) {
  if (shared(v)) shared_memo_.emplace(v.items.identity(), memoize());
}

}  // namespace memsight::write
