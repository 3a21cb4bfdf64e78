#pragma once
// The report page's data, computed from the snapshot model: torch's
// annotated event list (free_requested+free_completed pairs merged, address
// versions, small stream numbers), the timeline elements of MemoryViz's
// process_alloc_data in stacking order with their level-of-detail ranks and
// replay checkpoints, the allocator-state checkpoints of the state view, and
// the flamegraph trees. html.cpp packs them; docs/formats.md describes them.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight::report {

// Event codes of the page; viewer/src/format.js has the same table.
enum class PageAction : uint8_t {
  Alloc,
  FreeRequested,
  FreeCompleted,
  SegmentAlloc,
  SegmentFree,
  SegmentMap,
  SegmentUnmap,
  Snapshot,
  Oom,
  Other,
  Free,  // a free_requested immediately followed by its free_completed
};

struct DeviceEvents {
  std::vector<uint32_t> row;  // trace row of each display event
  std::vector<PageAction> action;
  std::vector<uint32_t> version;  // reuse count of the address (torch's version_space)
};

// torch's annotate_snapshot, for every device at once (versions and stream
// numbers are shared by all devices, as in MemoryViz).
struct Annotated {
  size_t devices = 0;
  std::vector<DeviceEvents> events;                 // per device
  std::vector<std::vector<uint32_t>> segments;      // per device: snapshot segment indices
  std::vector<int64_t> stream_raw;                  // small stream number -> raw cudaStream_t
  std::unordered_map<int64_t, uint32_t> stream_no;  // raw -> small number
  std::vector<uint32_t> segment_version;            // per snapshot segment
  std::vector<uint32_t> block_version;              // per snapshot block
  uint32_t stream(int64_t raw) const { return stream_no.at(raw); }
};
Annotated annotate(const Snapshot& snap);

// Element kinds of a timeline.
enum class ElementKind : uint8_t {
  Alloc,     // allocated in the trace; src = its alloc event
  FreeOnly,  // freed in the trace, allocated before it; src = its free event
  Live,      // in the snapshot state, not in the trace; src = ~snapshot block/segment index
};

// One device's "Active Memory Timeline" (or, for segments, "Active Cached
// Segment Timeline"): every element in stacking order, bottom first.
// Element e is live after event start(e) (or from the beginning) until its
// end event; the bands of the live elements stack in id order.
struct Timeline {
  std::vector<ElementKind> kind;
  std::vector<int32_t> src;
  std::vector<int32_t> end;       // event that frees it, -1: live at the end
  std::vector<uint32_t> tidx;     // MemoryViz's element index (its colour and label)
  std::vector<double> size;       // bytes (requested size; segment size)
  uint32_t initial = 0;           // elements [0, initial) are live before the first event
  std::vector<uint32_t> by_size;  // element ids, largest first (level of detail)
  // Live element ids (ascending) after events cp_interval-1, 2*cp_interval-1, ...
  uint32_t cp_interval = 0;
  std::vector<uint32_t> cp_off, cp_ids;
  // Live bytes over the events, in buckets of env_bucket events.
  uint32_t env_bucket = 1;
  std::vector<double> env_max, env_min;
  double peak = 0, final_total = 0, initial_total = 0;
  int64_t peak_event = -1;  // -1: the peak is the initial state
};
// interval: events between checkpoints (0: checkpoint_interval(events)).
Timeline build_timeline(const Snapshot& snap, const Annotated& ann, size_t device, bool segments,
                        uint32_t interval = 0);

// The allocator state (segments and blocks) after events cp_interval-1,
// 2*cp_interval-1, ... of one device, found by undoing events from the
// snapshot's final state as MemoryViz's segment view does.
struct StateCheckpoints {
  uint32_t cp_interval = 0;
  std::vector<uint32_t> seg_off;  // per checkpoint, into seg_*
  std::vector<double> seg_addr, seg_size;
  std::vector<int32_t> seg_src;  // >= 0: the event that re-created it; < 0: ~snapshot segment
  std::vector<uint32_t> blk_off;
  std::vector<int32_t> blk_src;   // >= 0: the free event that re-created it; < 0: ~snapshot block
  std::vector<uint8_t> blk_flag;  // 1: freed, waiting on another stream (active_pending_free)
};
StateCheckpoints build_state_checkpoints(const Snapshot& snap, const Annotated& ann, size_t device,
                                         uint32_t interval);

// A flamegraph as a tree in depth-first order: node 0 is the root. A node
// is named by a frame (its folded label "file.py:12:name", the file's base
// name after its last '/', as torch's folded stacks write it) or by a text
// ("stream_0", "seg_...", a block state, "<gaps>"): each distinct text is
// held once, so a tree of a million nodes naming one long file holds it once.
struct FlameTree {
  std::vector<int32_t> parent;
  std::vector<int64_t> name;   // >= 0: index into `texts`; < 0: ~frame id
  std::vector<int64_t> value;  // bytes of the node and its descendants
  std::vector<std::string> texts;
};
// torch's `memory` (segments=false) or `segments` folded stacks of one
// device's segments, as a tree.
FlameTree build_flame_tree(const Snapshot& snap, const Annotated& ann, size_t device,
                           bool segments);

// Checkpoint spacing: about 1 per 2048 events, at most ~256 checkpoints.
uint32_t checkpoint_interval(size_t events);
// What a device's checkpoints may hold (live elements, or segments and
// blocks) for `events` events: a state's size times the number of
// checkpoints grew with the square of what is live (30,000 released ranges:
// 10^7 entries in the page). Past it, every other checkpoint goes and the
// interval doubles until they fit, so the viewer undoes more events from the
// next checkpoint only where the states it draws are that large.
size_t checkpoint_budget(size_t events);

}  // namespace memsight::report
