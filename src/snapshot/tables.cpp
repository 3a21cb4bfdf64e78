// Interning tables of the snapshot model.
#include <cstring>

#include "memsight/snapshot.h"

namespace memsight {

StringTable::StringTable() { intern(""); }

StrId StringTable::intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
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
  index_.emplace(stored, id);
  return id;
}

size_t FrameTable::FrameHash::operator()(const Frame& f) const {
  uint64_t h = f.name * 0x9E3779B97F4A7C15ull;
  h ^= (f.filename + 0x632BE59BD9B4E019ull) + (h << 6) + (h >> 2);
  h ^= (static_cast<uint64_t>(f.line) + 0x94D049BB133111EBull) + (h << 6) + (h >> 2);
  h ^= f.extra + (h << 6) + (h >> 2);
  return h;
}

FrameTable::FrameTable() { stack_begin_ = {0, 0}; }  // stack 0: empty

FrameId FrameTable::intern_frame(const Frame& f) {
  auto [it, inserted] = frame_index_.emplace(f, static_cast<FrameId>(frames_.size()));
  if (inserted) frames_.push_back(f);
  return it->second;
}

StackId FrameTable::intern_stack(std::span<const FrameId> ids) {
  if (ids.empty()) return 0;
  uint64_t h = 0xcbf29ce484222325ull ^ ids.size();
  for (FrameId id : ids) h = (h ^ id) * 0x100000001b3ull;
  auto range = stack_index_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    auto s = stack(it->second);
    if (s.size() == ids.size() && std::equal(s.begin(), s.end(), ids.begin())) return it->second;
  }
  auto id = static_cast<StackId>(stack_begin_.size() - 1);
  stack_frames_.insert(stack_frames_.end(), ids.begin(), ids.end());
  stack_begin_.push_back(static_cast<uint32_t>(stack_frames_.size()));
  stack_index_.emplace(h, id);
  return id;
}

ShapeId ShapeTable::intern(std::span<const ShapeKey> keys) {
  for (size_t id = 0; id + 1 < begin_.size(); ++id) {
    auto s = get(static_cast<ShapeId>(id));
    if (s.size() == keys.size() &&
        std::equal(s.begin(), s.end(), keys.begin(), [](const ShapeKey& a, const ShapeKey& b) {
          return a.key == b.key && a.field == b.field;
        }))
      return static_cast<ShapeId>(id);
  }
  if (begin_.size() > 65535) throw std::length_error("too many distinct dict layouts");
  keys_.insert(keys_.end(), keys.begin(), keys.end());
  begin_.push_back(static_cast<uint32_t>(keys_.size()));
  return static_cast<ShapeId>(begin_.size() - 2);
}

namespace {
constexpr std::string_view kActionNames[] = {
    "alloc",        "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map",  "segment_unmap",  "snapshot",       "oom",           "other"};
}

std::string_view action_name(Action a) { return kActionNames[static_cast<int>(a)]; }

Action parse_action(std::string_view s) {
  for (int i = 0; i < static_cast<int>(Action::Other); ++i)
    if (kActionNames[i] == s) return static_cast<Action>(i);
  return Action::Other;
}

void TraceTable::reserve(size_t n) {
  action.reserve(n);
  addr.reserve(n);
  size.reserve(n);
  stream.reserve(n);
  time_us.reserve(n);
  compile_context.reserve(n);
  user_metadata.reserve(n);
  stack.reserve(n);
  shape.reserve(n);
}

void TraceTable::push_back_row() {
  action.push_back(Action::Other);
  addr.push_back(0);
  size.push_back(0);
  stream.push_back(0);
  time_us.push_back(0);
  compile_context.push_back(0);
  user_metadata.push_back(0);
  stack.push_back(0);
  shape.push_back(0);
}

const PyValue* Snapshot::top(std::string_view key) const {
  for (auto& [k, v] : top_level)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace memsight
