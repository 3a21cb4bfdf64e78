// What a device's trace asks of the allocator (simulate.h's Plan): which
// entries are requests and frees, which segment releases were an
// empty_cache() call and which a request's own retry, which frees a
// release completed, and what the recording says of the device's memory.
#include <algorithm>

#include "allocator/simulate.h"
#include "model/device_dicts.h"
#include "util/text_format.h"

namespace memsight::simulate {
namespace {

bool releases(Action a) { return a == Action::SegmentFree || a == Action::SegmentUnmap; }
bool creates(Action a) { return a == Action::SegmentAlloc || a == Action::SegmentMap; }

// The devices' memory as memsight's OOM observer records it beside the
// snapshot (top-level "memsight_device_memory": [{device, total, limit}]),
// the device's own entries (the last wins).
void observed_device(const Snapshot& snap, size_t device, Device& d) {
  for (const PyValue* e : snap.device_memory().of(static_cast<int64_t>(device))) {
    if (const PyValue* t = e->get("total"); t && t->kind == PyValue::Kind::Int) d.total = t->i;
    if (const PyValue* l = e->get("limit"); l && l->kind == PyValue::Kind::Int && l->i >= 0)
      d.limit = l->i;
  }
}

bool wrapped(const Snapshot& snap) {
  const PyValue* st = snap.top("allocator_settings");
  const PyValue* o = st ? st->get("trace_alloc_overflowed") : nullptr;
  if (!o) return false;
  if (o->kind == PyValue::Kind::List)
    return std::any_of(o->items.begin(), o->items.end(),
                       [](const PyValue& x) { return x.kind == PyValue::Kind::Bool && x.b; });
  return o->kind == PyValue::Kind::Bool && o->b;
}

// The device's trace entries, by index within it.
struct Entries {
  const TraceTable& t;
  uint32_t begin;
  int32_t n;
  Action act(int32_t i) const { return t.action[begin + i]; }
  int64_t addr(int32_t i) const { return t.addr[begin + i]; }
  int64_t size(int32_t i) const { return t.size[begin + i]; }
  // A free_completed not right after its free_requested: the block waited
  // for other streams (record_stream).
  bool waited(int32_t i) const {
    return act(i) == Action::FreeCompleted &&
           !(i > 0 && act(i - 1) == Action::FreeRequested && addr(i - 1) == addr(i));
  }
};

// One pass: what each entry asks, the segment creations (each serves the
// entry after it, in `created`), the releases (their entries in
// `release_rows`), the recorded reserved memory and its peak, and bounds on
// a memory cap from the successful creations and the capped OOMs.
void read_rows(const Entries& en, const alloc::Settings& recorded, Plan& p,
               std::vector<SegmentEvent>& created, std::vector<int32_t>& release_rows) {
  const int32_t n = en.n;
  p.rows.assign(static_cast<size_t>(n), Plan::kIgnore);
  int64_t reserved = 0;
  for (const alloc::SegmentRange& r : p.trace.start.segments) reserved += r.size;
  p.start_reserved = p.recorded_peak_reserved = reserved;
  Device& dev = p.device_recorded;
  int64_t lo = -1, hi = -1;
  for (int32_t i = 0; i < n; ++i) {
    const Action a = en.act(i);
    switch (a) {
      case Action::Alloc:
        p.rows[i] = Plan::kAlloc;
        break;
      case Action::FreeRequested:
        p.rows[i] =
            i + 1 < n && en.act(i + 1) == Action::FreeCompleted && en.addr(i + 1) == en.addr(i)
                ? Plan::kFree
                : Plan::kFreeRequested;
        break;
      case Action::FreeCompleted:
        if (en.waited(i)) p.rows[i] = Plan::kFreeCompleted;
        break;
      case Action::Oom: {
        p.rows[i] = Plan::kOom;
        p.recorded_ooms.push_back(i);
        int64_t free = en.addr(i), need = alloc::allocation_size(en.size(i));
        dev.capacity = reserved + free;
        if (need <= free) hi = hi < 0 ? reserved + need - 1 : std::min(hi, reserved + need - 1);
        break;
      }
      case Action::SegmentAlloc:
      case Action::SegmentMap: {
        int64_t sz = en.size(i);
        int32_t k = i;
        while (k < n && creates(en.act(k))) ++k;
        created.push_back({a, en.addr(i), sz, k});
        bool first_map = !(i > 0 && en.act(i - 1) == Action::SegmentMap);
        if (a == Action::SegmentAlloc)
          lo = std::max(lo, reserved + sz);
        else if (first_map && k < n && en.act(k) == Action::Alloc)
          lo = std::max(lo,
                        reserved + alloc::allocation_size(alloc::round_size(recorded, en.size(k))));
        reserved += sz;
        if (reserved > p.recorded_peak_reserved) {
          p.recorded_peak_reserved = reserved;
          p.recorded_peak_reserved_event = i;
        }
        break;
      }
      case Action::SegmentFree:
      case Action::SegmentUnmap:
        reserved -= en.size(i);
        release_rows.push_back(i);
        break;
      default:
        break;
    }
  }
  if (dev.limit < 0 && hi >= 0) {
    dev.limit = lo >= 0 && lo <= hi ? lo : hi;
    dev.limit_high = hi;
    dev.limit_inferred = true;
  }
  if (dev.total > 0 && dev.capacity < 0) dev.capacity = dev.total;
}

// Releases of cached segments. Inside a request (a retry after a failed
// cudaMalloc, garbage collection) they carry the request's context, so the
// same stack as the alloc or oom entry that follows them; an empty_cache()
// call's carry its own. Without stacks: a release followed by a new
// segment for the next request, or by an oom, is the request's.
void read_releases(const Entries& en, const std::vector<int32_t>& release_rows, Plan& p) {
  const int32_t n = en.n;
  for (size_t q = 0; q < release_rows.size();) {
    const int32_t i = release_rows[q];
    int32_t g0 = i;
    while (g0 > 0 && en.waited(g0 - 1)) --g0;
    int32_t j = i;
    while (j < n && (releases(en.act(j)) || en.waited(j))) ++j;
    int32_t k = j;
    while (k < n && creates(en.act(k))) ++k;
    bool request = k < n && (en.act(k) == Action::Alloc || en.act(k) == Action::Oom);
    if (request) {
      StackId sr = en.t.stack[en.begin + i], sk = en.t.stack[en.begin + k];
      request = sr || sk ? sr == sk : (k > j || en.act(k) == Action::Oom);
    }
    bool first = true;
    for (int32_t r = g0; r < j; ++r) {
      if (releases(en.act(r))) {
        p.rows[r] = !request && first ? Plan::kEmptyCache : Plan::kIgnore;
        first = false;
        p.recorded.push_back({en.act(r), en.addr(r), en.size(r), request ? k : i});
      } else if (request && en.waited(r)) {
        p.rows[r] = Plan::kFreeAfter;
      }
    }
    while (q < release_rows.size() && release_rows[q] < j) ++q;
  }
}

// Requests in a CUDA graph's private pool: those at addresses of a
// private pool's segment.
void read_private_pools(const Entries& en, Plan& p) {
  const alloc::StreamPoolIndex& index = p.trace.index;
  if (!index.has_private_pools()) return;
  for (int32_t i = 0; i < en.n; ++i) {
    if (p.rows[i] != Plan::kAlloc) continue;
    const alloc::SegmentRange* r = index.final_segment_at(en.addr(i));
    if (!r || (r->pool_id[0] == 0 && r->pool_id[1] == 0)) continue;
    std::pair<int64_t, int64_t> id{r->pool_id[0], r->pool_id[1]};
    auto it = std::find(p.pool_ids.begin(), p.pool_ids.end(), id);
    if (it == p.pool_ids.end()) it = p.pool_ids.insert(p.pool_ids.end(), id);
    p.private_rows.push_back(
        {static_cast<uint32_t>(i), static_cast<uint16_t>(it - p.pool_ids.begin())});
  }
}

// Why the history is not complete ("" when it is).
std::string incomplete(const Snapshot& snap, const Plan& p) {
  if (p.rows.empty()) return "the snapshot has no trace for this device";
  if (wrapped(snap))
    return "the history buffer wrapped: the simulation starts from an estimated state";
  if (p.trace.start.estimated)
    return "the trace frees " + count_of(p.trace.start.estimated, "block") +
           " it never saw allocated (recording began late or the buffer wrapped): "
           "their sizes are estimated";
  return "";
}

}  // namespace

Plan plan(const Snapshot& snap, size_t device) {
  Plan p;
  p.device = device;
  observed_device(snap, device, p.device_recorded);
  alloc::Settings recorded = alloc::Settings::recorded(snap);
  p.trace = alloc::read_device_trace(snap, device, recorded, p.device_recorded.total);
  const Entries en{snap.trace, p.trace.begin, static_cast<int32_t>(p.trace.end - p.trace.begin)};
  std::vector<SegmentEvent> created;
  std::vector<int32_t> release_rows;
  read_rows(en, recorded, p, created, release_rows);
  read_releases(en, release_rows, p);
  // Both lists are in trace order; merge them.
  p.recorded.insert(p.recorded.end(), created.begin(), created.end());
  std::stable_sort(p.recorded.begin(), p.recorded.end(),
                   [](const SegmentEvent& x, const SegmentEvent& y) { return x.owner < y.owner; });
  read_private_pools(en, p);
  p.incomplete = incomplete(snap, p);
  return p;
}

Inputs Inputs::recorded(const Snapshot& snap, const Plan& p) {
  Inputs in;
  in.settings = alloc::Settings::recorded(snap);
  in.device = p.device_recorded;
  return in;
}

}  // namespace memsight::simulate
