// Interning tables of the snapshot model.
#include <cstring>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "memsight/error.h"
#include "memsight/snapshot.h"
#include "util/escape.h"
#include "util/parallel.h"

namespace memsight {

namespace detail {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kBigColumn = kHugePage;
// Huge pages pay where many threads fault pages in at once: on the 16-vCPU
// GPU host `summary` took 0.109 s with them and 0.134 s without on 16
// threads, the same (0.16 s) on two. On a small VM whose host takes back
// what the guest frees they cost: each 2 MiB page is backed whole, and the
// 2-core development VM ran `summary` 1.68x slower with them right after
// another process freed much memory (bench/README.md).
constexpr unsigned kHugePageThreads = 8;
}  // namespace

#if defined(__linux__) && defined(MADV_HUGEPAGE)
void* column_alloc(size_t bytes) {
  if (bytes < kBigColumn) return ::operator new(bytes);
  void* p = ::operator new (bytes, std::align_val_t{kHugePage});
  // Before any page is touched; a refusal (no THP) leaves ordinary pages.
  if (threads_allowed() >= kHugePageThreads)
    ::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return p;
}

void column_free(void* p, size_t bytes) noexcept {
  if (bytes < kBigColumn)
    ::operator delete(p);
  else
    ::operator delete (p, std::align_val_t{kHugePage});
}
#else
// Elsewhere (the standalone viewer's WebAssembly heap among them) the
// alignment would only waste memory.
void* column_alloc(size_t bytes) { return ::operator new(bytes); }
void column_free(void* p, size_t) noexcept { ::operator delete(p); }
#endif
}  // namespace detail

StringTable::StringTable() { intern(""); }

StrId StringTable::intern(std::string_view s) {
  uint64_t h = std::hash<std::string_view>()(s);
  uint32_t found = index_.find(h, [&](uint32_t id) { return strings_[id] == s; });
  if (found != IdSlots::kNone) return found;
  // What Python's pickle cannot have written, pickle.loads would refuse: a
  // str must be UTF-8 (lone surrogates allowed), or it could not be written
  // back as one. Checked once per distinct string.
  if (!is_pickle_text(s)) throw Error("corrupted pickle: a str is not valid UTF-8");
  // Copies live in large chunks so the string_views stay valid.
  constexpr size_t kChunk = 1 << 16;
  if (s.size() > chunk_left_) {
    size_t n = std::max(kChunk, s.size());
    chunks_.emplace_back(new char[n]);
    chunk_pos_ = chunks_.back().get();
    chunk_left_ = n;
  }
  if (!s.empty()) std::memcpy(chunk_pos_, s.data(), s.size());
  std::string_view stored(chunk_pos_, s.size());
  chunk_pos_ += s.size();
  chunk_left_ -= s.size();
  auto id = static_cast<StrId>(strings_.size());
  strings_.push_back(stored);
  index_.add(id, h);
  return id;
}

uint64_t FrameTable::frame_hash(const Frame& f) {
  uint64_t h = f.name * 0x9E3779B97F4A7C15ull;
  h ^= (f.filename + 0x632BE59BD9B4E019ull) + (h << 6) + (h >> 2);
  h ^= (static_cast<uint64_t>(f.line) + 0x94D049BB133111EBull) + (h << 6) + (h >> 2);
  h ^= f.extra + (h << 6) + (h >> 2);
  return h;
}

FrameTable::FrameTable() { stack_begin_ = {0, 0}; }  // stack 0: empty

FrameId FrameTable::intern_frame(const Frame& f) {
  uint64_t h = frame_hash(f);
  uint32_t found = frame_index_.find(h, [&](uint32_t id) { return same_frame(frames_[id], f); });
  if (found != IdSlots::kNone) return found;
  auto id = static_cast<FrameId>(frames_.size());
  frames_.push_back(f);
  frame_index_.add(id, h);
  return id;
}

StackId FrameTable::intern_stack(std::span<const FrameId> ids) {
  if (ids.empty()) return 0;
  uint64_t h = 0xcbf29ce484222325ull ^ ids.size();
  for (FrameId id : ids) h = (h ^ id) * 0x100000001b3ull;
  StackId found = stack_index_.find(h, [&](uint32_t cand) {
    auto s = stack(cand);
    return s.size() == ids.size() && std::equal(s.begin(), s.end(), ids.begin());
  });
  if (found != IdSlots::kNone) return found;
  auto id = static_cast<StackId>(stack_begin_.size() - 1);
  stack_frames_.insert(stack_frames_.end(), ids.begin(), ids.end());
  stack_begin_.push_back(static_cast<uint32_t>(stack_frames_.size()));
  stack_index_.add(id, h);
  return id;
}

ShapeId ShapeTable::intern(std::span<const ShapeKey> keys) {
  uint64_t h = 0xcbf29ce484222325ull ^ keys.size();
  for (const ShapeKey& k : keys)
    h = (h ^ (uint64_t{k.key} << 8 | static_cast<uint8_t>(k.field))) * 0x100000001b3ull;
  uint32_t found = index_.find(h, [&](uint32_t id) {
    auto s = get(static_cast<ShapeId>(id));
    return s.size() == keys.size() &&
           std::equal(s.begin(), s.end(), keys.begin(), [](const ShapeKey& a, const ShapeKey& b) {
             return a.key == b.key && a.field == b.field;
           });
  });
  if (found != IdSlots::kNone) return static_cast<ShapeId>(found);
  if (begin_.size() > 65535) throw std::length_error("too many distinct dict layouts");
  keys_.insert(keys_.end(), keys.begin(), keys.end());
  begin_.push_back(static_cast<uint32_t>(keys_.size()));
  auto id = static_cast<ShapeId>(begin_.size() - 2);
  index_.add(id, h);
  return id;
}

namespace {
constexpr std::string_view kActionNames[] = {
    "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map", "segment_unmap",  "snapshot",       "oom",           "other"};
}

std::string_view action_name(Action a) { return kActionNames[static_cast<int>(a)]; }

Action parse_action(std::string_view s) {
  for (int i = 0; i < static_cast<int>(Action::Other); ++i)
    if (kActionNames[i] == s) return static_cast<Action>(i);
  return Action::Other;
}

void TraceTable::reserve(size_t n) {
#define MEMSIGHT_TRACE_RESERVE(Name, key, column, Kind) column.reserve(n);
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_RESERVE)
#undef MEMSIGHT_TRACE_RESERVE
  shape.reserve(n);
}

void TraceTable::resize(size_t n) {
#define MEMSIGHT_TRACE_RESIZE(Name, key, column, Kind) column.resize(n);
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_RESIZE)
#undef MEMSIGHT_TRACE_RESIZE
  shape.resize(n);
}

void TraceTable::append_row(const TraceTable& from, uint32_t r) {
  auto to = static_cast<uint32_t>(rows());
#define MEMSIGHT_TRACE_COPY(Name, key, column, Kind) column.push_back(from.column[r]);
  MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_COPY)
#undef MEMSIGHT_TRACE_COPY
  shape.push_back(from.shape[r]);
  if (auto it = from.action_name.find(r); it != from.action_name.end())
    action_name[to] = it->second;
  if (auto it = from.extras.find(r); it != from.extras.end()) extras[to] = it->second;
}

const PyValue* Snapshot::top(std::string_view key) const {
  // Most snapshots have a handful of keys; each device asks for a few, so a
  // scan of a hostile file's million keys per device was devices x keys
  // (4,000 devices, 80,000 keys: whatif 5.7 s).
  constexpr size_t kScan = 16;
  if (top_level.size() <= kScan) {
    for (auto& [k, v] : top_level)
      if (k == key) return &v;
    return nullptr;
  }
  auto hash = [](std::string_view s) { return std::hash<std::string_view>()(s); };
  std::shared_ptr<const TopIndex> index;
  {
    std::lock_guard<std::mutex> lock(top_index_.mutex);
    if (!top_index_.index || top_index_.index->size != top_level.size()) {
      auto made = std::make_shared<TopIndex>();
      for (size_t i = 0; i < top_level.size(); ++i) {
        // A repeated key gives its first value, as the scan did.
        const std::string& k = top_level[i].first;
        uint64_t h = hash(k);
        if (made->slots.find(h, [&](uint32_t j) { return top_level[j].first == k; }) ==
            IdSlots::kNone)
          made->slots.add(static_cast<uint32_t>(i), h);
      }
      made->size = top_level.size();
      top_index_.index = std::move(made);
    }
    index = top_index_.index;
  }
  uint32_t at = index->slots.find(hash(key), [&](uint32_t i) { return top_level[i].first == key; });
  return at == IdSlots::kNone ? nullptr : &top_level[at].second;
}

}  // namespace memsight
