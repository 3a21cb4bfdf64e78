// The segments of a moment are the snapshot's, undone back to it: a segment
// allocated after the moment did not exist yet, one freed after it did. A
// segment's pool is the snapshot's segment at its address, else the
// default one (as the replay decides it, stream_pool_index.h). Free blocks
// are the gaps between the blocks live then (the allocator merges
// neighbouring free blocks of a segment into one).
#include "analysis/moments/graph_pool_free.h"

#include <algorithm>
#include <vector>

#include "allocator/alloc_rules.h"

namespace memsight {
namespace {

struct Range {
  int64_t start = 0, size = 0;
  bool graph = false;
};

bool private_pool(const Segment& s) { return s.pool_id[0] != 0 || s.pool_id[1] != 0; }

std::vector<Range> segments_at(const Snapshot& snap, size_t device, int64_t event) {
  std::vector<Range> out;
  for (const Segment& s : snap.segments)
    if (s.device == static_cast<int64_t>(device))
      out.push_back({s.address, s.total_size, private_pool(s)});
  if (device >= snap.device_count()) return out;
  const auto [begin, end] = snap.device_rows(device);
  const TraceTable& t = snap.trace;
  for (uint32_t r = end; r-- > begin && static_cast<int64_t>(r - begin) > event;) {
    if (t.action[r] == Action::SegmentAlloc) {
      std::erase_if(out, [&](const Range& g) { return g.start == int64_t{t.addr[r]}; });
    } else if (t.action[r] == Action::SegmentFree) {
      out.push_back({t.addr[r], t.size[r], false});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Range& a, const Range& b) { return a.start < b.start; });
  return out;
}

}  // namespace

GraphPoolFree graph_pool_free(const Snapshot& snap, size_t device, const replay::Result& rr,
                              int64_t event) {
  GraphPoolFree g;
  for (const Segment& s : snap.segments)
    if (s.device == static_cast<int64_t>(device) && private_pool(s) && !s.is_expandable)
      g.pools = true;
  if (!g.pools) return g;
  const std::vector<Range> segs = segments_at(snap, device, event);
  std::vector<std::pair<int64_t, int64_t>> live;  // (address, size)
  for (size_t i = 0, n = replay::allocated_by(rr, event); i < n; ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    if (l.free_requested > event) live.emplace_back(l.address, l.size);
  }
  std::sort(live.begin(), live.end());
  auto next = live.begin();
  for (const Range& s : segs) {
    const bool small = s.size <= alloc::kSmallBuffer;
    int64_t at = s.start;
    next = std::lower_bound(live.begin(), live.end(), std::make_pair(s.start, int64_t{0}));
    auto gap = [&](int64_t to) {
      if (to <= at) return;
      if (s.graph) {
        g.bytes += to - at;
        ++g.blocks;
      } else {
        int64_t& largest = small ? g.outside_largest_small : g.outside_largest_large;
        largest = std::max(largest, to - at);
      }
    };
    for (; next != live.end() && next->first < s.start + s.size; ++next) {
      gap(next->first);
      at = std::max(at, next->first + next->second);
    }
    gap(s.start + s.size);
  }
  return g;
}

}  // namespace memsight
