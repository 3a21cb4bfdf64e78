// The allocator's snapshot taken natively: c10's CUDACachingAllocator state
// and history, the recorded stacks symbolized once each by torch's own
// symbolizer, laid out as the flat arrays of raw_snapshot.h. memsight's
// engine writes torch's pickle from them (memsight._core.snapshot_from_raw),
// so no Python object is made for the hundreds of thousands of entries and
// millions of frames a big history holds.
//
// Built on first use against the installed torch's headers (see
// memsight/torch/_native_dump.py) and loaded with ctypes; every entry point
// is C and reports failures as a message, never as an exception.
//
// Where the time of torch's own dump goes (docs/dumps.md): the first
// symbolization of native frames in a process loads the symbol tables of
// torch's libraries (seconds); memsight_dump_warm() pays that early, on a
// background thread, so that a dump at an OOM finds them loaded.
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "raw_snapshot.h"

namespace {

namespace A = c10::cuda::CUDACachingAllocator;
using torch::CapturedTraceback;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void set_error(char* err, int err_len, const char* what) {
  if (err && err_len > 0) std::snprintf(err, static_cast<size_t>(err_len), "%s", what);
}

// torch::symbolize is called by one thread at a time (the warm-up and a dump
// may race); the symbolizer keeps process-wide caches.
std::mutex symbolize_mutex;

// Members that older torch releases lack are read through these, so that
// the dumper builds against any torch 2.x; what a release lacks, its own
// snapshot lacks too (the raw snapshot's `has_*` flags say so).
template <class E>
auto compile_context_of(const E& e, int) -> decltype(std::string(e.compile_context_)) {
  return e.compile_context_;
}
template <class E>
std::string compile_context_of(const E&, long) {
  return {};
}
template <class E>
constexpr auto has_compile_context(int) -> decltype(std::declval<E>().compile_context_, true) {
  return true;
}
template <class E>
constexpr bool has_compile_context(long) {
  return false;
}
template <class E>
auto user_metadata_of(const E& e, int) -> decltype(std::string(e.user_metadata_)) {
  return e.user_metadata_;
}
template <class E>
std::string user_metadata_of(const E&, long) {
  return {};
}
template <class E>
constexpr auto has_user_metadata(int) -> decltype(std::declval<E>().user_metadata_, true) {
  return true;
}
template <class E>
constexpr bool has_user_metadata(long) {
  return false;
}
template <class S>
auto annotations_of(const S& s, int) -> decltype((s.external_annotations)) {
  return s.external_annotations;
}
template <class S>
const std::vector<int>& annotations_of(const S&, long) {
  static const std::vector<int> none;
  return none;
}
template <class S>
constexpr auto has_annotations(int) -> decltype(std::declval<S>().external_annotations, true) {
  return true;
}
template <class S>
constexpr bool has_annotations(long) {
  return false;
}
template <class C>
auto graph_reuse_of(const C& c, int) -> decltype(int(c.graph_capture_record_stream_reuse)) {
  return c.graph_capture_record_stream_reuse ? 1 : 0;
}
template <class C>
int graph_reuse_of(const C&, long) {
  return -1;  // not in this torch's settings
}
// The allocator's state; with or without its history where torch can leave
// it out (include_traces, torch 2.8+).
template <class F = int>
auto snapshot_of(bool traces, int) -> decltype(A::snapshot({0, 0}, traces)) {
  return A::snapshot({0, 0}, traces);
}
template <class F = int>
A::SnapshotInfo snapshot_of(bool, long) {
  return A::snapshot();
}

CapturedTraceback* traceback_of(const std::shared_ptr<c10::GatheredContext>& c) {
  return c ? dynamic_cast<CapturedTraceback*>(c.get()) : nullptr;
}

struct Strings {
  std::unordered_map<std::string, uint32_t> index;
  std::vector<uint64_t> offsets{0};
  std::string bytes;
  Strings() { intern(""); }
  uint32_t intern(const std::string& s) {
    auto [it, fresh] = index.try_emplace(s, static_cast<uint32_t>(offsets.size() - 1));
    if (fresh) {
      bytes += s;
      offsets.push_back(bytes.size());
    }
    return it->second;
  }
};

struct VecHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// Owns every array a memsight_raw_snapshot points into.
struct Dump {
  memsight_raw_snapshot raw{};
  Strings strings;
  std::vector<msr_frame> frames;
  std::vector<uint32_t> stack_offsets{0, 0};  // stack 0: empty
  std::vector<uint32_t> stack_frames;
  std::vector<msr_segment> segments;
  std::vector<msr_block> blocks;
  std::vector<uint64_t> device_offsets{0};
  std::vector<msr_entry> entries;
  std::vector<msr_annotation> annotations;
  std::vector<uint32_t> annotation_kv;
  std::vector<int64_t> divisions;

  void publish() {
    raw.abi = MEMSIGHT_RAW_SNAPSHOT_ABI;
    raw.n_strings = static_cast<uint32_t>(strings.offsets.size() - 1);
    raw.string_offsets = strings.offsets.data();
    raw.string_bytes = strings.bytes.data();
    raw.n_frames = static_cast<uint32_t>(frames.size());
    raw.frames = frames.data();
    raw.n_stacks = static_cast<uint32_t>(stack_offsets.size() - 1);
    raw.stack_offsets = stack_offsets.data();
    raw.stack_frames = stack_frames.data();
    raw.n_segments = static_cast<uint32_t>(segments.size());
    raw.segments = segments.data();
    raw.n_blocks = static_cast<uint32_t>(blocks.size());
    raw.blocks = blocks.data();
    raw.n_devices = static_cast<uint32_t>(device_offsets.size() - 1);
    raw.device_offsets = device_offsets.data();
    raw.entries = entries.data();
    raw.n_annotations = static_cast<uint32_t>(annotations.size());
    raw.annotations = annotations.data();
    raw.annotation_kv = annotation_kv.data();
    raw.settings.n_divisions = static_cast<uint32_t>(divisions.size());
    raw.settings.divisions = divisions.data();
  }
};

// The unique tracebacks of a snapshot, and each one's index among them.
struct Tracebacks {
  std::vector<CapturedTraceback*> unique;
  std::unordered_map<CapturedTraceback*, uint32_t> index;
  uint32_t add(const std::shared_ptr<c10::GatheredContext>& c) {
    CapturedTraceback* t = traceback_of(c);
    if (!t) return UINT32_MAX;
    auto [it, fresh] = index.try_emplace(t, static_cast<uint32_t>(unique.size()));
    if (fresh) unique.push_back(t);
    return it->second;
  }
};

void fill_settings(Dump& d, const A::AllocatorConfigInfo& c) {
  msr_settings& s = d.raw.settings;
  s.alloc_conf = d.strings.intern(c.last_allocator_settings);
  s.garbage_collection_threshold = c.garbage_collection_threshold;
  s.max_split_size = static_cast<int64_t>(c.max_split_size);
  s.pinned_num_register_threads = static_cast<int64_t>(c.pinned_num_register_threads);
  s.expandable_segments = c.expandable_segments;
  s.release_lock_on_cudamalloc = c.release_lock_on_malloc;
  s.pinned_use_cuda_host_register = c.pinned_use_host_register;
  int reuse = graph_reuse_of(c, 0);
  s.graph_capture_record_stream_reuse = reuse > 0;
  d.raw.has_graph_capture_record_stream_reuse = reuse >= 0;
  for (size_t v : c.roundup_power2_divisions) d.divisions.push_back(static_cast<int64_t>(v));
}

template <class List>
void add_annotations(Dump& d, const List& list) {
  if constexpr (!std::is_same_v<List, std::vector<int>>) {
    for (const auto& a : list) {
      msr_annotation ma{};
      ma.device = a.device_;
      ma.time_us = static_cast<int64_t>(a.time_.t_);
      ma.kv_begin = static_cast<uint32_t>(d.annotation_kv.size() / 2);
      for (const auto& [k, v] : a.metadata_) {
        d.annotation_kv.push_back(d.strings.intern(k));
        d.annotation_kv.push_back(d.strings.intern(v));
      }
      ma.kv_end = static_cast<uint32_t>(d.annotation_kv.size() / 2);
      d.annotations.push_back(ma);
    }
  }
}

// Dumps handed out, by the address of their raw snapshot.
std::mutex dumps_mutex;
std::unordered_map<const memsight_raw_snapshot*, std::unique_ptr<Dump>> dumps;

// Every context, in the order torch symbolizes them; -1 where none.
void gather_contexts(const A::SnapshotInfo& snap, Tracebacks& tbs, std::vector<uint32_t>& seg_tb,
                     std::vector<uint32_t>& block_tb, std::vector<uint32_t>& entry_tb) {
  for (const auto& s : snap.segments) {
    seg_tb.push_back(tbs.add(s.context_when_allocated));
    for (const auto& b : s.blocks) block_tb.push_back(tbs.add(b.context_when_allocated));
  }
  for (const auto& dev : snap.device_traces)
    for (const auto& e : dev) entry_tb.push_back(tbs.add(e.context_));
}

// Symbolize each unique traceback once; intern frames and whole stacks.
void symbolize_stacks(Dump& d, Tracebacks& tbs, std::vector<uint32_t>& stack_of_tb) {
  torch::SymbolizedTracebacks st;
  {
    std::lock_guard<std::mutex> lock(symbolize_mutex);
    st = torch::symbolize(tbs.unique);
  }
  std::vector<uint32_t> frame_id(st.all_frames.size());
  std::unordered_map<std::string, uint32_t> frame_index;  // "name\0file\0line" -> id
  std::string key;
  for (size_t i = 0; i < st.all_frames.size(); ++i) {
    const auto& f = st.all_frames[i];
    msr_frame mf{d.strings.intern(f.funcname), d.strings.intern(f.filename),
                 static_cast<int64_t>(f.lineno)};
    key.assign(reinterpret_cast<const char*>(&mf), sizeof mf);
    auto [it, fresh] = frame_index.try_emplace(key, static_cast<uint32_t>(d.frames.size()));
    if (fresh) d.frames.push_back(mf);
    frame_id[i] = it->second;
  }
  std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> stack_index;
  std::vector<uint32_t> ids;
  for (size_t t = 0; t < st.tracebacks.size(); ++t) {
    ids.clear();
    for (uint64_t f : st.tracebacks[t]) ids.push_back(frame_id[f]);
    if (ids.empty()) continue;  // stack 0
    auto [it, fresh] =
        stack_index.try_emplace(ids, static_cast<uint32_t>(d.stack_offsets.size() - 1));
    if (fresh) {
      d.stack_frames.insert(d.stack_frames.end(), ids.begin(), ids.end());
      d.stack_offsets.push_back(static_cast<uint32_t>(d.stack_frames.size()));
    }
    stack_of_tb[t] = it->second;
  }
}

// The stack of a traceback index; stack 0 (empty) where there is none.
uint32_t stack_of(const std::vector<uint32_t>& stack_of_tb, uint32_t tb) {
  return tb == UINT32_MAX ? 0u : stack_of_tb[tb];
}

void add_segments(Dump& d, const A::SnapshotInfo& snap, const std::vector<uint32_t>& seg_tb,
                  const std::vector<uint32_t>& block_tb, const std::vector<uint32_t>& stack_of_tb) {
  auto stack = [&](uint32_t tb) { return stack_of(stack_of_tb, tb); };
  size_t bi = 0;
  for (size_t si = 0; si < snap.segments.size(); ++si) {
    const auto& s = snap.segments[si];
    msr_segment ms{};
    ms.device = s.device;
    ms.address = static_cast<int64_t>(s.address);
    ms.total_size = static_cast<int64_t>(s.total_size);
    ms.allocated_size = static_cast<int64_t>(s.allocated_size);
    ms.active_size = static_cast<int64_t>(s.active_size);
    ms.requested_size = static_cast<int64_t>(s.requested_size);
    ms.stream = static_cast<int64_t>(reinterpret_cast<intptr_t>(s.stream));
    ms.pool_id[0] = s.owner_private_pool_id.first;
    ms.pool_id[1] = s.owner_private_pool_id.second;
    ms.stack = stack(seg_tb[si]);
    ms.has_context = seg_tb[si] != UINT32_MAX;
    ms.is_large = s.is_large;
    ms.is_expandable = s.is_expandable;
    ms.block_begin = static_cast<uint32_t>(d.blocks.size());
    for (const auto& b : s.blocks) {
      msr_block mb{};
      mb.size = static_cast<int64_t>(b.size);
      mb.requested_size = static_cast<int64_t>(b.requested_size);
      mb.state =
          b.allocated ? MSR_ACTIVE_ALLOCATED : (b.active ? MSR_ACTIVE_PENDING_FREE : MSR_INACTIVE);
      mb.stack = stack(block_tb[bi]);
      mb.has_context = block_tb[bi] != UINT32_MAX;
      ++bi;
      d.blocks.push_back(mb);
    }
    ms.block_end = static_cast<uint32_t>(d.blocks.size());
    d.segments.push_back(ms);
  }
}

void add_entries(Dump& d, const A::SnapshotInfo& snap, const std::vector<uint32_t>& entry_tb,
                 const std::vector<uint32_t>& stack_of_tb) {
  auto stack = [&](uint32_t tb) { return stack_of(stack_of_tb, tb); };
  size_t ei = 0;
  for (const auto& dev : snap.device_traces) {
    for (const auto& e : dev) {
      msr_entry me{};
      me.action = static_cast<uint8_t>(e.action_);
      me.addr = static_cast<int64_t>(e.addr_);
      me.size = static_cast<int64_t>(e.size_);
      me.stream = static_cast<int64_t>(reinterpret_cast<intptr_t>(e.stream_));
      me.time_us = static_cast<int64_t>(e.time_.t_);
      me.compile_context = d.strings.intern(compile_context_of(e, 0));
      me.user_metadata = d.strings.intern(user_metadata_of(e, 0));
      me.stack = stack(entry_tb[ei]);
      me.has_context = entry_tb[ei] != UINT32_MAX;
      ++ei;
      d.entries.push_back(me);
    }
    d.device_offsets.push_back(d.entries.size());
  }
}

Dump* take(bool symbolize) {
  auto dump = std::make_unique<Dump>();
  Dump& d = *dump;
  double t0 = now();
  A::SnapshotInfo snap = snapshot_of(true, 0);
  double t1 = now();
  Tracebacks tbs;
  std::vector<uint32_t> seg_tb, block_tb, entry_tb;
  gather_contexts(snap, tbs, seg_tb, block_tb, entry_tb);
  double t2 = now();
  std::vector<uint32_t> stack_of_tb(tbs.unique.size(), 0);
  if (symbolize && !tbs.unique.empty()) symbolize_stacks(d, tbs, stack_of_tb);
  double t3 = now();
  add_segments(d, snap, seg_tb, block_tb, stack_of_tb);
  add_entries(d, snap, entry_tb, stack_of_tb);
  using Entry = std::decay_t<decltype(snap.device_traces[0][0])>;
  d.raw.has_compile_context = has_compile_context<Entry>(0);
  d.raw.has_user_metadata = has_user_metadata<Entry>(0);
  d.raw.has_annotations = has_annotations<A::SnapshotInfo>(0);
  add_annotations(d, annotations_of(snap, 0));
  fill_settings(d, snap.config_metadata);
  double t4 = now();
  d.raw.seconds_state = t1 - t0;
  d.raw.seconds_gather = t2 - t1;
  d.raw.seconds_symbolize = t3 - t2;
  d.raw.seconds_arrays = t4 - t3;
  d.publish();
  Dump* out = dump.get();
  std::lock_guard<std::mutex> lock(dumps_mutex);
  dumps.emplace(&out->raw, std::move(dump));
  return out;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int memsight_dump_abi(void) {
  return MEMSIGHT_RAW_SNAPSHOT_ABI;
}

// The allocator's snapshot, symbolized, or NULL with a message in err.
// The caller frees it with memsight_dump_free. Called without the GIL:
// torch's Python unwinder takes it to name Python frames.
__attribute__((visibility("default"))) const memsight_raw_snapshot* memsight_dump_take(
    int symbolize, char* err, int err_len) {
  try {
    return &take(symbolize != 0)->raw;
  } catch (const std::exception& e) {
    set_error(err, err_len, e.what());
  } catch (...) {
    set_error(err, err_len, "unknown C++ exception");
  }
  return nullptr;
}

__attribute__((visibility("default"))) void memsight_dump_free(const memsight_raw_snapshot* raw) {
  std::lock_guard<std::mutex> lock(dumps_mutex);
  dumps.erase(raw);
}

// Where the dump's time went: state, gather, symbolize, arrays (seconds).
__attribute__((visibility("default"))) void memsight_dump_timings(const memsight_raw_snapshot* raw,
                                                                  double* out) {
  out[0] = raw->seconds_state;
  out[1] = raw->seconds_gather;
  out[2] = raw->seconds_symbolize;
  out[3] = raw->seconds_arrays;
}

// Symbolizes up to max_stacks of the stacks the allocator holds for its live
// blocks, so that torch's symbolizer has loaded what a dump will need.
// Writes how many stacks it symbolized (0: none recorded yet) and returns 0,
// or -1 with a message.
__attribute__((visibility("default"))) int memsight_dump_warm(int max_stacks, int* symbolized,
                                                              char* err, int err_len) {
  try {
    A::SnapshotInfo snap = snapshot_of(false, 0);
    Tracebacks tbs;
    for (const auto& s : snap.segments) {
      tbs.add(s.context_when_allocated);
      for (const auto& b : s.blocks) {
        if (static_cast<int>(tbs.unique.size()) >= max_stacks) break;
        tbs.add(b.context_when_allocated);
      }
    }
    if (!tbs.unique.empty()) {
      std::lock_guard<std::mutex> lock(symbolize_mutex);
      (void)torch::symbolize(tbs.unique);
    }
    *symbolized = static_cast<int>(tbs.unique.size());
    return 0;
  } catch (const std::exception& e) {
    set_error(err, err_len, e.what());
  } catch (...) {
    set_error(err, err_len, "unknown C++ exception");
  }
  return -1;
}

}  // extern "C"
