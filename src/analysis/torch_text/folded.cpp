// Folded stacks of torch's `_memory_viz memory`, `segments` and `compare`
// (what torch feeds flamegraph.pl), byte for byte.
#include <set>

#include "analysis/frames/frames_fmt.h"
#include "analysis/torch_text/pyset_order.h"
#include "memsight/text_tools.h"

namespace memsight {
namespace {

const PyValue* block_extra(const Snapshot& snap, const Block& b, std::string_view key) {
  if (!b.extra) return nullptr;
  size_t xi = 0;
  for (const ShapeKey& k : snap.shapes.get(b.shape)) {
    if (k.field != Field::Extra) continue;
    if (snap.str(k.key) == key) return &snap.extras[b.extra - 1][xi];
    ++xi;
  }
  return nullptr;
}

std::string pyvalue_frames_fragment(const PyValue& frames) {
  if (frames.kind != PyValue::Kind::List || frames.items.empty()) return "<non-python>";
  std::string out;
  bool first = true;
  for (size_t i = frames.items.size(); i-- > 0;) {
    const PyValue& f = frames.items[i];
    const PyValue* n = f.get("name");
    const PyValue* fn = f.get("filename");
    const PyValue* ln = f.get("line");
    std::string name = n && n->kind == PyValue::Kind::Str ? n->s.str() : "";
    std::string file = fn && fn->kind == PyValue::Kind::Str ? fn->s.str() : "";
    std::string line = ln ? py_repr(*ln) : "0";
    if (!keep_frame(name, file)) continue;
    if (!first) out += ';';
    first = false;
    append_frame(out, name, file, line);
  }
  return out;
}

// Appends "head + tail count\n" and records the line; the tail is a text
// or a stack's fragment.
void add_line(Folded& out, const std::string& head, std::string_view tail, int64_t count,
              StackFormatter* fmt = nullptr, StackId stack = 0) {
  size_t begin = out.text.size();
  out.text += head;
  if (fmt)
    fmt->append(out.text, stack);
  else
    out.text += tail;
  out.lines.push_back({begin, out.text.size() - begin, count});
  out.text += ' ' + std::to_string(count) + '\n';
}

// torch's _write_blocks.
void write_blocks(Folded& out, const std::string& prefix, const Snapshot& snap, const Segment& seg,
                  StackFormatter& fmt) {
  for (const Block& b : snap.segment_blocks(seg)) {
    std::string head = prefix + ';' + std::string(snap.str(b.state_name)) + ';';
    int64_t accounted = 0;
    const PyValue* history = block_extra(snap, b, "history");  // torch checks it first
    if (!history) {
      if (shape_has(snap, b.shape, Field::Frames)) {
        accounted = b.requested_size;
        add_line(out, head, {}, accounted, &fmt, b.stack);
      } else {
        accounted = shape_has(snap, b.shape, Field::RequestedSize) ? b.requested_size : b.size;
        add_line(out, head, "<non-python>", accounted);
      }
    } else if (history->kind == PyValue::Kind::List) {
      for (const PyValue& h : history->items) {
        const PyValue* rs = h.get("real_size");
        int64_t sz = rs && rs->kind == PyValue::Kind::Int ? rs->i : 0;
        accounted += sz;
        if (const PyValue* fr = h.get("frames"))
          add_line(out, head, pyvalue_frames_fragment(*fr), sz);
        else
          add_line(out, head, "<no-context>", sz);
      }
    }
    int64_t gaps = b.size - accounted;
    if (gaps) add_line(out, head, "<gaps>", gaps);
  }
}

}  // namespace

Folded folded_memory_lines(const Snapshot& snap) {
  Folded out;
  StackFormatter fmt(snap);
  for (const Segment& seg : snap.segments)
    write_blocks(out, "stream_" + std::to_string(seg.stream), snap, seg, fmt);
  return out;
}

Folded folded_segments_lines(const Snapshot& snap) {
  Folded out;
  StackFormatter fmt(snap);
  for (const Segment& seg : snap.segments)
    write_blocks(out,
                 "stream_" + std::to_string(seg.stream) + ";seg_" + std::to_string(seg.address),
                 snap, seg, fmt);
  return out;
}

std::string folded_memory(const Snapshot& snap) { return folded_memory_lines(snap).text; }
std::string folded_segments(const Snapshot& snap) { return folded_segments_lines(snap).text; }

Comparison compare(const Snapshot& before, const Snapshot& after) {
  using Key = std::pair<int64_t, int64_t>;
  auto keys_of = [](const Snapshot& s) {
    std::vector<Key> keys;
    for (const Segment& seg : s.segments) keys.emplace_back(seg.address, seg.total_size);
    return keys;
  };
  std::vector<Key> kb = keys_of(before), ka = keys_of(after);
  std::set<Key> sb(kb.begin(), kb.end()), sa(ka.begin(), ka.end());
  Comparison c;
  // torch prints list(set_a - set_b): CPython's set iteration order.
  auto print = [&](const char* label, const std::vector<Key>& a, const std::vector<Key>& b) {
    c.stdout_text += std::string(label) + " = [";
    bool first = true;
    for (const Key& k : pyset_difference_order(a, b)) {
      if (!first) c.stdout_text += ", ";
      first = false;
      c.stdout_text += std::to_string(k.first);
    }
    c.stdout_text += "]\n";
  };
  print("only_before", kb, ka);
  print("only_after", ka, kb);
  StackFormatter fb(before), fa(after);
  Folded folded;
  for (const Segment& seg : before.segments)
    if (!sa.count({seg.address, seg.total_size}))
      write_blocks(folded,
                   "only_before;stream_" + std::to_string(seg.stream) + ";seg_" +
                       std::to_string(seg.address),
                   before, seg, fb);
  for (const Segment& seg : after.segments)
    if (!sb.count({seg.address, seg.total_size}))
      write_blocks(
          folded,
          "only_after;stream_" + std::to_string(seg.stream) + ";seg_" + std::to_string(seg.address),
          after, seg, fa);
  c.folded = std::move(folded.text);
  c.folded_lines = std::move(folded.lines);
  return c;
}

}  // namespace memsight
