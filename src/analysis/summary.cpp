// summarize(): peaks by replaying the trace, live sites at the peak, cache
// fragmentation and out-of-memory diagnosis.
#include "memsight/summary.h"

#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>

#include "analysis/frames_fmt.h"
#include "memsight/text_tools.h"

namespace memsight {
namespace {

struct Live {
  int64_t size = 0;
  StackId stack = 0;
  bool needs_stack = false;  // freed after the peak: its alloc stack is found later
};

// Address-keyed tables for the replays, flat and open-addressed: the
// forward and backward passes do one lookup per trace entry, where node-based
// containers were the summary's largest cost. Erase leaves a tombstone.
template <typename V>
class AddressMap {
 public:
  AddressMap() : keys_(1024, kEmpty), vals_(1024) {}
  V* find(int64_t a) {
    size_t mask = keys_.size() - 1;
    for (size_t i = hash(a) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == a) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  V& operator[](int64_t a) {
    if (V* v = find(a)) return *v;
    if ((used_ + 1) * 2 > keys_.size())
      rehash(size_ * 4 > keys_.size() ? keys_.size() * 2 : keys_.size());
    size_t mask = keys_.size() - 1, i = hash(a) & mask;
    while (keys_[i] != kEmpty && keys_[i] != kTomb) i = (i + 1) & mask;
    if (keys_[i] == kEmpty) ++used_;
    keys_[i] = a;
    vals_[i] = V{};
    ++size_;
    return vals_[i];
  }
  void erase(int64_t a) {
    size_t mask = keys_.size() - 1;
    for (size_t i = hash(a) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == a) {
        keys_[i] = kTomb;
        --size_;
        return;
      }
      if (keys_[i] == kEmpty) return;
    }
  }
  template <typename F>
  void for_each(F&& f) {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmpty && keys_[i] != kTomb) f(keys_[i], vals_[i]);
  }

 private:
  // Neither is a valid address.
  static constexpr int64_t kEmpty = INT64_MIN, kTomb = INT64_MIN + 1;
  // Addresses are multiples of 512: mix every bit down (splitmix64's finaliser).
  static size_t hash(int64_t a) {
    auto x = static_cast<uint64_t>(a);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return static_cast<size_t>(x ^ (x >> 33));
  }
  void rehash(size_t cap) {
    std::vector<int64_t> keys(cap, kEmpty);
    std::vector<V> vals(cap);
    size_t mask = cap - 1;
    for (size_t j = 0; j < keys_.size(); ++j) {
      if (keys_[j] == kEmpty || keys_[j] == kTomb) continue;
      size_t i = hash(keys_[j]) & mask;
      while (keys[i] != kEmpty) i = (i + 1) & mask;
      keys[i] = keys_[j];
      vals[i] = vals_[j];
    }
    keys_.swap(keys);
    vals_.swap(vals);
    used_ = size_;
  }
  std::vector<int64_t> keys_;
  std::vector<V> vals_;
  size_t size_ = 0, used_ = 0;  // live keys; live keys + tombstones
};

struct Seen {};

bool active(const Block& b) {
  return b.state == BlockState::ActiveAllocated || b.state == BlockState::ActivePendingFree;
}

// Blocks occupy whole 512-byte units; a trace entry only has the request.
int64_t occupied(int64_t requested) {
  return std::max<int64_t>(512, (requested + 511) / 512 * 512);
}

int64_t largest_gap(const std::map<int64_t, int64_t>& segments,
                    const std::map<int64_t, int64_t>& blocks) {
  int64_t best = 0;
  for (auto [start, size] : segments) {
    int64_t cur = start, end = start + size;
    for (auto it = blocks.lower_bound(start); it != blocks.end() && it->first < end; ++it) {
      best = std::max(best, it->first - cur);
      cur = std::max(cur, it->first + it->second);
    }
    best = std::max(best, end - cur);
  }
  return best;
}

void diagnose(OomReport& o) {
  auto sz = [](int64_t v) { return format_size(static_cast<double>(v)); };
  std::string facts = "Requested " + sz(o.requested) + " with " + sz(o.device_free) +
                      " free on the device; " + sz(o.allocated) + " was in live allocations and " +
                      sz(o.cached_free) + " was reserved by the caching allocator but unused " +
                      "(largest free block " + sz(o.largest_free) + ").";
  if (o.requested <= o.device_free) {
    // The device itself had room: a cap inside the process refused it.
    o.verdict = "limit";
    o.explanation =
        facts + " Memory limit: the device had enough free memory, so the allocator's own " +
        "limit refused the request (torch.cuda.set_per_process_memory_fraction, or another " +
        "process-level cap). Raise the limit or reduce what is live at this point.";
  } else if (o.requested <= o.cached_free + o.device_free) {
    o.verdict = "fragmentation";
    o.explanation =
        facts + " Fragmentation: enough memory was free in total, but not in one piece: the " +
        "unused reserved memory sits in segments that also hold live tensors, so it could not " +
        "be released or reused for this request. Setting " +
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True usually avoids this.";
  } else {
    o.verdict = "demand";
    o.explanation = facts + " True demand: even with every unused cached byte released, " +
                    sz(o.requested - o.cached_free - o.device_free) +
                    " more was needed. Reduce what is live at this point (batch size, activation " +
                    "checkpointing, freeing references earlier) or use a larger device.";
  }
}

}  // namespace

std::string describe_stack(const Snapshot& snap, StackId stack, size_t max_frames) {
  auto frames = snap.frames.stack(stack);
  if (frames.empty()) return "<no stack recorded>";
  std::string out;
  size_t shown = 0;
  for (FrameId id : frames) {  // innermost first
    const Frame& f = snap.frames.frame(id);
    auto name = snap.str(f.name), file = snap.str(f.filename);
    if (!keep_frame(name, file)) continue;
    // Prefer the user's code: skip torch's own Python frames while we can.
    bool torch_internal = file.find("/torch/") != std::string_view::npos;
    if (torch_internal && shown == 0 && id != frames.back()) continue;
    if (!out.empty()) out += " <- ";
    append_frame(out, name, file, std::to_string(f.line));
    if (++shown == max_frames) break;
  }
  return out.empty() ? "<only internal frames>" : out;
}

Summary summarize(const Snapshot& snap) {
  Summary sum;
  const TraceTable& t = snap.trace;
  size_t ndev = snap.device_count();
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && s.device < 1024) ndev = std::max(ndev, static_cast<size_t>(s.device + 1));
  bool settings_overflow = false, settings_known = false;
  if (const PyValue* st = snap.top("allocator_settings"))
    if (const PyValue* o = st->get("trace_alloc_overflowed")) {
      settings_known = true;
      settings_overflow = o->kind == PyValue::Kind::Bool ? o->b : (o->kind == PyValue::Kind::List);
      if (o->kind == PyValue::Kind::List)
        settings_overflow =
            std::any_of(o->items.begin(), o->items.end(), [](const PyValue& v) { return v.b; });
    }
  for (size_t d = 0; d < ndev; ++d) {
    DeviceSummary ds;
    ds.device = static_cast<int>(d);
    uint32_t begin = 0, end = 0;
    if (d < snap.device_count()) std::tie(begin, end) = snap.device_rows(d);
    ds.entries = end - begin;
    sum.total_entries += ds.entries;

    // Final state.
    AddressMap<Live> live;
    std::map<int64_t, int64_t> seg_map, block_map;
    for (const Segment& s : snap.segments) {
      if (s.device != static_cast<int64_t>(d)) continue;
      ds.reserved_now += s.total_size;
      ++ds.segments_now;
      seg_map[s.address] = s.total_size;
      for (const Block& b : snap.segment_blocks(s)) {
        if (active(b)) {
          ds.allocated_now += b.requested_size;
          live[b.address] = {b.requested_size, b.stack, false};
          block_map[b.address] = b.size;
        } else {
          ds.free_now += b.size;
          ++ds.free_blocks_now;
          ds.largest_free_now = std::max(ds.largest_free_now, b.size);
        }
      }
    }
    if (ds.free_now > 0)
      ds.fragmentation =
          1.0 - static_cast<double>(ds.largest_free_now) / static_cast<double>(ds.free_now);

    // Start values from the final state minus the trace's net effect.
    int64_t net_alloc = 0, net_res = 0;
    for (uint32_t r = begin; r < end; ++r) {
      switch (t.action[r]) {
        case Action::Alloc:
          net_alloc += t.size[r];
          break;
        case Action::FreeCompleted:
          net_alloc -= t.size[r];
          break;
        case Action::SegmentAlloc:
        case Action::SegmentMap:
          net_res += t.size[r];
          break;
        case Action::SegmentFree:
        case Action::SegmentUnmap:
          net_res -= t.size[r];
          break;
        default:
          break;
      }
    }
    int64_t cur_alloc = ds.allocated_now - net_alloc, cur_res = ds.reserved_now - net_res;
    ds.peak_allocated = cur_alloc;
    ds.peak_reserved = cur_res;
    std::vector<int64_t> alloc_at, res_at;  // after each OOM's event, filled below
    AddressMap<Seen> seen_alloc;
    std::vector<uint32_t> oom_rows;
    for (uint32_t r = begin; r < end; ++r) {
      switch (t.action[r]) {
        case Action::Alloc:
          cur_alloc += t.size[r];
          seen_alloc[t.addr[r]];
          break;
        case Action::FreeCompleted:
          cur_alloc -= t.size[r];
          break;
        case Action::FreeRequested:
          if (!seen_alloc.find(t.addr[r])) ++ds.orphan_frees;
          break;
        case Action::SegmentAlloc:
        case Action::SegmentMap:
          cur_res += t.size[r];
          break;
        case Action::SegmentFree:
        case Action::SegmentUnmap:
          cur_res -= t.size[r];
          break;
        case Action::Oom:
          oom_rows.push_back(r);
          alloc_at.push_back(cur_alloc);
          res_at.push_back(cur_res);
          break;
        default:
          break;
      }
      if (cur_alloc > ds.peak_allocated) {
        ds.peak_allocated = cur_alloc;
        ds.peak_allocated_event = r - begin;
        ds.peak_allocated_time_us = t.time_us[r];
      }
      if (cur_res > ds.peak_reserved) {
        ds.peak_reserved = cur_res;
        ds.peak_reserved_event = r - begin;
        ds.peak_reserved_time_us = t.time_us[r];
      }
    }
    ds.history_wrapped =
        settings_known ? (settings_overflow ? "yes" : "no") : (ds.orphan_frees ? "possibly" : "no");

    // One backward pass: undo events down to each OOM (allocator state at
    // that moment) and down to the peak (what was live then).
    uint32_t peak_row = ds.peak_allocated_event < 0 ? begin : begin + ds.peak_allocated_event + 1;
    size_t need_stack = 0;
    size_t next_oom = oom_rows.size();
    for (uint32_t r = end; r-- > begin;) {
      while (next_oom > 0 && oom_rows[next_oom - 1] == r) {
        --next_oom;
        OomReport o;
        o.event = r - begin;
        o.time_us = t.time_us[r];
        o.requested = t.size[r];
        o.device_free = t.addr[r];
        o.allocated = alloc_at[next_oom];
        o.reserved = res_at[next_oom];
        o.cached_free = std::max<int64_t>(0, o.reserved - o.allocated);
        o.largest_free = largest_gap(seg_map, block_map);
        o.stack = t.stack[r];
        diagnose(o);
        ds.ooms.insert(ds.ooms.begin(), o);
      }
      // Allocator state is needed only while an OOM lies further back; the
      // live set only down to the peak.
      bool need_state = next_oom > 0, need_live = r >= peak_row;
      if (!need_state && !need_live) break;
      int64_t a = t.addr[r];
      switch (t.action[r]) {
        case Action::Alloc:
          if (need_state) block_map.erase(a);
          if (need_live) {
            if (Live* l = live.find(a); l && l->needs_stack) --need_stack;
            live.erase(a);
          }
          break;
        case Action::FreeCompleted:
          if (need_state) block_map[a] = occupied(t.size[r]);
          if (need_live) {
            Live& l = live[a];
            if (!l.needs_stack) ++need_stack;
            l = {t.size[r], 0, true};
          }
          break;
        case Action::SegmentAlloc:
        case Action::SegmentMap:
          if (need_state) seg_map.erase(a);
          break;
        case Action::SegmentFree:
        case Action::SegmentUnmap:
          if (need_state) seg_map[a] = t.size[r];
          break;
        default:
          break;
      }
    }
    // Allocation stacks of blocks freed after the peak: their alloc events.
    for (uint32_t r = peak_row; r-- > begin && need_stack > 0;) {
      if (t.action[r] != Action::Alloc) continue;
      if (Live* l = live.find(t.addr[r]); l && l->needs_stack) {
        l->stack = t.stack[r];
        l->needs_stack = false;
        --need_stack;
      }
    }
    // A site is what a person reads: stacks that agree on their innermost
    // user frames are one site (the first stack seen stands for it).
    std::unordered_map<StackId, std::string> label;
    std::unordered_map<std::string, SiteStat> sites;
    live.for_each([&](int64_t, const Live& l) {
      auto it = label.find(l.stack);
      if (it == label.end()) it = label.emplace(l.stack, describe_stack(snap, l.stack)).first;
      SiteStat& s = sites[it->second];
      if (s.count == 0 || l.stack < s.stack) s.stack = l.stack;
      s.bytes += l.size;
      ++s.count;
    });
    for (auto& [id, s] : sites) ds.top_sites.push_back(s);
    std::sort(ds.top_sites.begin(), ds.top_sites.end(), [](const SiteStat& a, const SiteStat& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack < b.stack;
    });
    if (ds.top_sites.size() > 10) ds.top_sites.resize(10);
    sum.devices.push_back(std::move(ds));
  }
  return sum;
}

}  // namespace memsight
