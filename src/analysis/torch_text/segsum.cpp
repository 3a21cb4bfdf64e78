// torch's segsum (`_memory_viz stats`): a page map of every segment of at
// least 20 MiB and the totals, reproduced exactly, floating point included.
#include <algorithm>
#include <numeric>

#include "memsight/text_tools.h"

namespace memsight {
namespace {

constexpr int64_t kPage = 20 * 1024 * 1024;

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Block size accounted as allocated: torch's _block_extra.
int64_t accounted(const Snapshot& snap, const Block& b) {
  if (!shape_has(snap, b.shape, Field::Frames)) {
    // Legacy blocks: history[0]['real_size'] when present.
    if (b.extra) {
      size_t xi = 0;
      for (const ShapeKey& k : snap.shapes.get(b.shape)) {
        if (k.field != Field::Extra) continue;
        const PyValue& v = snap.extras[b.extra - 1][xi++];
        if (snap.str(k.key) == "history" && v.kind == PyValue::Kind::List && !v.items.empty())
          if (const PyValue* rs = v.items[0].get("real_size"); rs && rs->kind == PyValue::Kind::Int)
            return rs->i;
      }
    }
    if (!shape_has(snap, b.shape, Field::RequestedSize)) return b.size;
  }
  return b.requested_size;
}

std::string report_free(int64_t free_external, int64_t free_internal) {
  int64_t total = free_external + free_internal;
  std::string suffix;
  if (total != 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " (%.1f%% internal)",
                  static_cast<double>(free_internal) / static_cast<double>(total) * 100);
    suffix = buf;
  }
  return format_size(static_cast<double>(total)) + suffix;
}

constexpr std::string_view kLegend = R"(
Legend:
    [a     ] - a segment in the allocator
     ^-- a page 20.0MiB of memory in the segment
    a-z: pages filled with a single block's content
    ' ': page is completely free
    *: page if completely full with multiple blocks
    0-9: page is partially full with tensors of multiple blocks (9 == 90% full)
    (X% internal) - of the free memory, X% is free because we rounded the size of the allocation.
)";

}  // namespace

std::string segsum(const Snapshot& snap) {
  std::string out = "Summary of segments >= " + format_size(kPage) + " in size\n";
  std::vector<size_t> order(snap.segments.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> active(snap.segments.size(), 0);
  for (size_t i = 0; i < snap.segments.size(); ++i)
    for (const Block& b : snap.segment_blocks(snap.segments[i]))
      if (b.state == BlockState::ActiveAllocated) active[i] += b.size;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &sa = snap.segments[a], &sb = snap.segments[b];
    return sa.total_size != sb.total_size ? sa.total_size < sb.total_size : active[a] < active[b];
  });
  int64_t total_reserved = 0, total_allocated = 0, free_external = 0, free_internal = 0;
  for (size_t idx : order) {
    const Segment& seg = snap.segments[idx];
    total_reserved += seg.total_size;
    int64_t seg_ext = 0, seg_int = 0, seg_alloc = 0, boffset = 0;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const Block& b : snap.segment_blocks(seg)) {
      if (b.state == BlockState::ActiveAllocated) {
        int64_t a = accounted(snap, b);
        ranges.emplace_back(boffset, a);
        seg_alloc += a;
        seg_int += b.size - a;
      } else {
        seg_ext += b.size;
      }
      boffset += b.size;
    }
    total_allocated += seg_alloc;
    free_external += seg_ext;
    free_internal += seg_int;
    if (seg.total_size < kPage) continue;  // only the map is skipped; totals count
    int64_t nseg = floor_div(seg.total_size - 1, kPage) + 1;
    std::string occupied(static_cast<size_t>(std::max<int64_t>(nseg, 0)), ' ');
    std::vector<double> frac(occupied.size(), 0.0);
    for (size_t i = 0; i < ranges.size(); ++i) {
      auto [start_, size] = ranges[i];
      int64_t finish_ = start_ + size;
      int64_t start = floor_div(start_, kPage), finish = floor_div(finish_ - 1, kPage) + 1;
      char m = static_cast<char>('a' + i % 26);
      for (int64_t j = std::max<int64_t>(start, 0); j < finish && j < nseg; ++j) {
        int64_t s = std::max(start_, j * kPage), e = std::min(finish_, (j + 1) * kPage);
        frac[j] += static_cast<double>(e - s) / static_cast<double>(kPage);
        if (occupied[j] != ' ') {
          auto level = static_cast<int64_t>(frac[j] * 10);  // truncation, as int()
          occupied[j] = "0123456789*"[std::clamp<int64_t>(level, 0, 10)];
        } else {
          occupied[j] = m;
        }
      }
    }
    out += '[' + occupied + "] " + format_size(static_cast<double>(seg.total_size)) +
           " allocated, " + report_free(seg_ext, seg_int) + " free";
    if (seg.stream != 0) out += " stream_" + std::to_string(seg.stream);
    out += '\n';
  }
  out += "segments: " + std::to_string(snap.segments.size()) + '\n';
  out += "total_reserved: " + format_size(static_cast<double>(total_reserved)) + '\n';
  out += "total_allocated: " + format_size(static_cast<double>(total_allocated)) + '\n';
  out += "total_free: " + report_free(free_external, free_internal) + '\n';
  out += kLegend;
  return out;
}

}  // namespace memsight
