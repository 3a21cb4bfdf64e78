// Allocator-state checkpoints of the report page.
//
// The state view shows the segments and blocks after any event. Like
// MemoryViz's segment view it starts from the snapshot (the state after the
// last event) and undoes events backwards; doing that once here and keeping
// the state every cp_interval events lets the browser reach any event by
// undoing at most cp_interval events from the next checkpoint.
#include <algorithm>
#include <map>

#include "report/page_data.h"

namespace memsight::report {
namespace {

struct Seg {
  int64_t size;
  int32_t src;
  int64_t stream;  // raw, for merging unmapped neighbours
};
struct Blk {
  int32_t src;
  uint8_t flag;
};

using SegMap = std::map<int64_t, Seg>;
using BlkMap = std::map<int64_t, Blk>;

// The state after the last event: the snapshot's segments and its active
// blocks on this device.
void snapshot_state(const Snapshot& snap, const Annotated& ann, size_t device, SegMap& segs,
                    BlkMap& blocks) {
  for (uint32_t si : ann.segments[device]) {
    const Segment& s = snap.segments[si];
    segs[s.address] = {s.total_size, ~static_cast<int32_t>(si), s.stream};
    for (uint32_t b = s.block_begin; b < s.block_end; ++b) {
      const Block& blk = snap.blocks[b];
      if (blk.state == BlockState::ActiveAllocated || blk.state == BlockState::ActivePendingFree)
        blocks[blk.address] = {~static_cast<int32_t>(b),
                               static_cast<uint8_t>(blk.state == BlockState::ActivePendingFree)};
    }
  }
}

// One checkpoint's state, in address order.
struct Saved {
  std::vector<double> seg_addr, seg_size;
  std::vector<int32_t> seg_src, blk_src;
  std::vector<uint8_t> blk_flag;
};

void save(Saved& s, const SegMap& segs, const BlkMap& blocks) {
  for (const auto& [addr, seg] : segs) {
    s.seg_addr.push_back(static_cast<double>(addr));
    s.seg_size.push_back(static_cast<double>(seg.size));
    s.seg_src.push_back(seg.src);
  }
  for (const auto& [addr, blk] : blocks) {
    s.blk_src.push_back(blk.src);
    s.blk_flag.push_back(blk.flag);
  }
}

// Undoing an unmap: the range comes back, joined to its mapped neighbours of
// the same stream.
void undo_unmap(SegMap& segs, int64_t addr, Seg seg) {
  auto it = segs.insert_or_assign(addr, seg).first;
  if (auto next = std::next(it); next != segs.end() && next->first == addr + it->second.size &&
                                 next->second.stream == it->second.stream) {
    it->second.size += next->second.size;
    segs.erase(next);
  }
  if (it != segs.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size == addr && prev->second.stream == it->second.stream) {
      prev->second.size += it->second.size;
      segs.erase(it);
    }
  }
}

// Undoing a map: the range goes away, cut out of the segment holding it.
void undo_map(SegMap& segs, int64_t addr, int64_t size) {
  auto it = segs.upper_bound(addr);
  if (it == segs.begin()) return;
  --it;
  int64_t base = it->first, end = base + it->second.size;
  if (addr >= end) return;
  Seg seg = it->second;
  segs.erase(it);
  if (addr > base) segs[base] = {addr - base, seg.src, seg.stream};
  if (addr + size < end) segs[addr + size] = {end - (addr + size), seg.src, seg.stream};
}

// The state before event i, from the state after it.
void undo(SegMap& segs, BlkMap& blocks, const TraceTable& t, const DeviceEvents& ev, size_t i) {
  uint32_t r = ev.row[i];
  int64_t addr = t.addr[r], size = t.size[r];
  auto src = static_cast<int32_t>(i);
  switch (ev.action[i]) {
    case PageAction::Free:
      blocks[addr] = {src, 0};
      break;
    case PageAction::FreeRequested:
      if (auto it = blocks.find(addr); it != blocks.end()) it->second.flag = 0;
      break;
    case PageAction::FreeCompleted:
      blocks[addr] = {src, 1};
      break;
    case PageAction::Alloc:
      blocks.erase(addr);
      break;
    case PageAction::SegmentFree:
      segs[addr] = {size, src, t.stream[r]};
      break;
    case PageAction::SegmentAlloc:
      segs.erase(addr);
      break;
    case PageAction::SegmentUnmap:
      undo_unmap(segs, addr, Seg{size, src, t.stream[r]});
      break;
    case PageAction::SegmentMap:
      undo_map(segs, addr, size);
      break;
    default:
      break;
  }
}

// The checkpoints one after another, with their offsets.
void append_checkpoints(StateCheckpoints& cp, std::vector<Saved>& saved) {
  cp.seg_off.push_back(0);
  cp.blk_off.push_back(0);
  for (Saved& s : saved) {
    cp.seg_addr.insert(cp.seg_addr.end(), s.seg_addr.begin(), s.seg_addr.end());
    cp.seg_size.insert(cp.seg_size.end(), s.seg_size.begin(), s.seg_size.end());
    cp.seg_src.insert(cp.seg_src.end(), s.seg_src.begin(), s.seg_src.end());
    cp.blk_src.insert(cp.blk_src.end(), s.blk_src.begin(), s.blk_src.end());
    cp.blk_flag.insert(cp.blk_flag.end(), s.blk_flag.begin(), s.blk_flag.end());
    cp.seg_off.push_back(static_cast<uint32_t>(cp.seg_src.size()));
    cp.blk_off.push_back(static_cast<uint32_t>(cp.blk_src.size()));
  }
}

}  // namespace

StateCheckpoints build_state_checkpoints(const Snapshot& snap, const Annotated& ann, size_t device,
                                         uint32_t interval) {
  const DeviceEvents& ev = ann.events[device];
  const size_t n = ev.row.size();
  StateCheckpoints cp;
  SegMap segs;
  BlkMap blocks;
  snapshot_state(snap, ann, device, segs, blocks);
  // Checkpoint k holds the state after event (k+1)*interval-1, for those
  // before the last event (the state after the last one is the snapshot).
  size_t count = n > 1 ? (n - 1) / interval : 0;
  std::vector<Saved> saved(count);
  size_t held = 0;
  const size_t budget = checkpoint_budget(n);
  for (size_t i = n; i-- > 0;) {
    if ((i + 1) % interval == 0 && (i + 1) / interval - 1 < count) {
      save(saved[(i + 1) / interval - 1], segs, blocks);
      held += segs.size() + blocks.size();
      // Twice the interval: checkpoint k is the old 2k+1.
      while (held > budget && count > 0) {
        interval *= 2;
        count = (n - 1) / interval;
        held = 0;
        for (size_t k = 0; k < count; ++k) {
          saved[k] = std::move(saved[2 * k + 1]);
          held += saved[k].seg_src.size() + saved[k].blk_src.size();
        }
        saved.resize(count);
      }
    }
    undo(segs, blocks, snap.trace, ev, i);
  }
  cp.cp_interval = interval;
  append_checkpoints(cp, saved);
  return cp;
}

}  // namespace memsight::report
