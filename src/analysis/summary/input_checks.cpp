// snapshot_input_notes: what a snapshot holds outside memsight's rule for
// numbers (memsight/input_limits.h). The snapshot is read as it is, so that
// the text tools print what torch prints; the summary and the page say here,
// once, which numbers they could not take at face value.
#include "memsight/input_limits.h"
#include "memsight/summary.h"

namespace memsight {
namespace {

constexpr InputReason kBadTraceSize{
    "trace entry", "trace entries",
    "with a size outside 0..2^53 bytes (negative, or 8 PiB and more; one of 2^59 and more "
    "counts as 0): peaks that include them are not real"};
constexpr InputReason kBadSegmentSize{
    "segment or block", "segments or blocks",
    "with a size outside 0..2^53 bytes: the state at the snapshot that includes them is not real"};
constexpr InputReason kEarlierTime{
    "trace entry", "trace entries",
    "with a time earlier than an entry before: the page's clock does not go back for them"};

}  // namespace

InputNotes snapshot_input_notes(const Snapshot& snap) {
  InputNotes notes;
  auto out_of_range = [](int64_t v) { return !byte_count_ok(static_cast<double>(v)); };
  // Rows whose "size" was an integer too large for the model's columns keep it
  // verbatim as an extra (their size column reads 0): found by their shape.
  std::vector<int8_t> big_size(snap.shapes.size(), -1);
  auto size_is_big = [&](ShapeId id) {
    if (big_size[id] < 0) {
      big_size[id] = 0;
      for (const ShapeKey& k : snap.shapes.get(id))
        if (k.field == Field::Extra && k.key && snap.str(k.key) == "size") big_size[id] = 1;
    }
    return big_size[id] == 1;
  };
  const TraceTable& t = snap.trace;
  uint64_t bad = 0, earlier = 0;
  for (size_t d = 0; d < snap.device_count(); ++d) {
    auto [begin, end] = snap.device_rows(d);
    int64_t latest = begin < end ? t.time_us[begin] : 0;
    for (uint32_t r = begin; r < end; ++r) {
      if (out_of_range(t.size[r]) ||
          (!snap.shapes.get(t.shape[r]).empty() && size_is_big(t.shape[r])))
        ++bad;
      if (t.time_us[r] < latest) ++earlier;
      latest = std::max(latest, t.time_us[r]);
    }
  }
  notes.add(kBadTraceSize, bad);
  uint64_t bad_state = 0;
  for (const Segment& s : snap.segments) bad_state += out_of_range(s.total_size);
  for (const Block& b : snap.blocks) bad_state += out_of_range(b.size);
  notes.add(kBadSegmentSize, bad_state);
  notes.add(kEarlierTime, earlier);
  return notes;
}

}  // namespace memsight
