// One device's trace read for the allocator (see device_trace.h).
#include "allocator/device_trace.h"

#include <algorithm>

#include "allocator/address_map.h"
#include "model/segment_index.h"

namespace memsight::alloc {
namespace {

bool is_alloc_event(Action a) {
  return a == Action::Alloc || a == Action::FreeRequested || a == Action::FreeCompleted;
}

// The snapshot's segments of the device (by address) and its live blocks.
void read_final_state(const Snapshot& snap, size_t device, DeviceTrace& dt) {
  auto dev = static_cast<int64_t>(device);
  std::vector<SegmentRange>& final_segments = dt.index.final_segments;
  for (uint32_t i : snap.segments_by_device().of(dev)) {
    const Segment& sg = snap.segments[i];
    final_segments.push_back({sg.address,
                              sg.total_size,
                              sg.stream,
                              snap.str(sg.segment_type) == "small",
                              sg.is_expandable,
                              {sg.pool_id[0], sg.pool_id[1]}});
    for (const memsight::Block& b : snap.segment_blocks(sg))
      if (b.state == BlockState::ActiveAllocated || b.state == BlockState::ActivePendingFree)
        dt.final_live[b.address] = {b.size, b.requested_size, b.stack,
                                    b.state == BlockState::ActivePendingFree};
  }
  std::sort(final_segments.begin(), final_segments.end(),
            [](const SegmentRange& x, const SegmentRange& y) { return x.start < y.start; });
}

// Numbers the requests and finds the blocks live at the start: those the
// trace frees before allocating them (their sizes estimated), and those live
// at the snapshot that no event touches. Each block is a request: the
// trace's allocations in order, then the blocks live at the start by
// address; a free names the request it ends. Returns the streams of the
// trace's entries, as met.
std::vector<int64_t> number_requests(const TraceTable& t, const Settings& s, DeviceTrace& dt) {
  std::vector<LiveBlock>& live = dt.start.live;
  constexpr uint32_t kOrphan = 1u << 31;  // a block freed first: provisional ids
  const uint32_t n = dt.end - dt.begin;
  dt.request.resize(n);  // every row is written below
  uint32_t* request = dt.request.data();
  const int64_t *addr_of = t.addr.data() + dt.begin, *stream_of = t.stream.data() + dt.begin;
  const Action* action_of = t.action.data() + dt.begin;
  AddressMap<uint32_t> live_now;  // address -> request
  AddressMap<uint8_t> final_touched;
  for (const auto& [addr, fb] : dt.final_live) final_touched[addr] = 0;
  std::vector<uint32_t> orphan_rows;  // rows naming an orphan
  std::vector<int64_t> streams;
  int64_t last_stream = INT64_MIN;
  uint32_t allocs = 0;
  for (uint32_t e = 0; e < n; ++e) {
    if (stream_of[e] != last_stream) streams.push_back(last_stream = stream_of[e]);
    Action a = action_of[e];
    if (!is_alloc_event(a)) {
      request[e] = DeviceTrace::kNoRequest;
      continue;
    }
    int64_t addr = addr_of[e];
    if (a == Action::Alloc) {
      live_now[addr] = request[e] = allocs++;
      if (uint8_t* f = final_touched.find(addr)) *f = 1;
      continue;
    }
    uint32_t* q = live_now.find(addr);
    if (!q) {  // freed before it was allocated: live at the start
      LiveBlock l;
      l.addr = addr;
      l.requested = t.size[dt.begin + e];
      l.size = round_size(s, l.requested);  // estimated: its allocation is not in the trace
      l.pending = a == Action::FreeCompleted;
      l.estimated = true;
      l.request = kOrphan | static_cast<uint32_t>(live.size());
      live.push_back(l);
      q = &(live_now[addr] = l.request);
      if (uint8_t* f = final_touched.find(addr)) *f = 1;
    }
    request[e] = *q;
    if (*q & kOrphan) orphan_rows.push_back(e);
    // A plain free: free_requested, then at once its free_completed.
    if (a == Action::FreeRequested && e + 1 < n && action_of[e + 1] == Action::FreeCompleted &&
        addr_of[e + 1] == addr) {
      request[++e] = *q;
      if (*q & kOrphan) orphan_rows.push_back(e);
      a = Action::FreeCompleted;
    }
    if (a == Action::FreeCompleted) live_now.erase(addr);
  }
  dt.allocs = allocs;
  dt.start.estimated = static_cast<int64_t>(live.size());
  for (const auto& [addr, fb] : dt.final_live)
    if (!*final_touched.find(addr))
      live.push_back({addr, fb.size, fb.requested, fb.stack, fb.pending, false, 0});
  // Stable: the trace can free one address before allocating it several
  // times (a wrapped history); those blocks keep the trace's order, on every
  // standard library (std::sort orders ties differently in libc++, which the
  // standalone viewer's engine uses, and the replay then differs).
  std::stable_sort(live.begin(), live.end(),
                   [](const LiveBlock& x, const LiveBlock& y) { return x.addr < y.addr; });
  std::vector<uint32_t> renumber(static_cast<size_t>(dt.start.estimated));
  for (uint32_t k = 0; k < live.size(); ++k) {
    if (live[k].request & kOrphan) renumber[live[k].request & ~kOrphan] = allocs + k;
    live[k].request = allocs + k;
  }
  for (uint32_t row : orphan_rows) request[row] = renumber[request[row] & ~kOrphan];
  dt.requests = allocs + static_cast<uint32_t>(live.size());
  return streams;
}

// Every stream of the device, ascending: those of its entries and segments.
std::vector<int64_t> device_streams(std::vector<int64_t> streams, const DeviceTrace& dt) {
  for (const SegmentRange& r : dt.start.segments) streams.push_back(r.stream);
  for (const SegmentRange& r : dt.index.final_segments) streams.push_back(r.stream);
  std::sort(streams.begin(), streams.end());
  streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
  return streams;
}

}  // namespace

DeviceTrace read_device_trace(const Snapshot& snap, size_t device, const Settings& s,
                              int64_t device_total) {
  DeviceTrace dt;
  const TraceTable& t = snap.trace;
  if (device < snap.device_count()) std::tie(dt.begin, dt.end) = snap.device_rows(device);
  dt.start.space_size = expandable_space_size(device_total);
  read_final_state(snap, device, dt);
  // Segment events are few: found once, so that the passes over them read
  // no other entry.
  dt.segment_rows = segment_rows(t, dt.begin, dt.end);
  dt.start.segments = segments_at_start(t, dt.segment_rows, dt.index.final_segments);
  dt.index.streams = device_streams(number_requests(t, s, dt), dt);
  return dt;
}

int64_t reserved_peak_entry(const TraceTable& t, uint32_t begin, uint32_t end, int64_t event) {
  if (event < 0) return event;
  int64_t i = event;
  auto creates = [&](int64_t k) {
    Action a = t.action[begin + static_cast<uint32_t>(k)];
    return a == Action::SegmentAlloc || a == Action::SegmentMap;
  };
  while (begin + i < end && creates(i)) ++i;
  if (i == event || begin + i >= end || t.action[begin + static_cast<uint32_t>(i)] != Action::Alloc)
    return event;
  return i;
}

}  // namespace memsight::alloc
