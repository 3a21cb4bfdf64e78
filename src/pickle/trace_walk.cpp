// The helpers of a parallel trace walk (see skip.cpp for the protocol).
#include "pickle/trace_walk.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

namespace memsight::trace_walk {

void walk_chunk_body(Chunk& c, Chunk* next, const uint8_t* end, std::string_view key,
                     const std::atomic<bool>& cancel, const ByteSource& src, const uint8_t* base);

size_t op_size(const uint8_t* q) {
  switch (*q) {
    case MARK:
    case EMPTY_DICT:
    case EMPTY_LIST:
    case EMPTY_TUPLE:
    case MEMOIZE:
    case APPEND:
    case APPENDS:
    case SETITEM:
    case SETITEMS:
    case NONE:
    case NEWTRUE:
    case NEWFALSE:
    case TUPLE1:
    case TUPLE2:
    case TUPLE3:
      return 1;
    case BINGET:
    case BININT1:
      return 2;
    case BININT2:
      return 3;
    case BININT:
    case LONG_BINGET:
      return 5;
    case BINFLOAT:
    case FRAME:
      return 9;
    case LONG1:
    case SHORT_BINUNICODE:
    case SHORT_BINBYTES:
      return 2 + size_t{q[1]};
    default:
      return 0;
  }
}

void walk_chunk(Chunk& c, Chunk* next, const uint8_t* end, std::string_view key,
                const std::atomic<bool>& cancel, const ByteSource& src, const uint8_t* base) {
  try {
    walk_chunk_body(c, next, end, key, cancel, src, base);
  } catch (...) {  // out of memory recording the ops: the main thread walks it
    c.state.store(-1, std::memory_order_release);
  }
}

void walk_chunk_body(Chunk& c, Chunk* next, const uint8_t* end, std::string_view key,
                     const std::atomic<bool>& cancel, const ByteSource& src, const uint8_t* base) {
  auto fail = [&] { c.state.store(-1, std::memory_order_release); };
  const uint8_t* q = c.from;
  auto is_entry = [&] {
    return q[0] == EMPTY_DICT && q[1] == MEMOIZE && q[2] == MARK &&
           std::memcmp(q + 3, key.data(), key.size()) == 0;
  };
  for (const uint8_t* limit = q + (1 << 20);;) {
    if (end - q < 1024 || q > limit) return fail();
    if (is_entry()) break;
    size_t n = op_size(q);
    if (n == 0) return fail();
    q += n;
  }
  c.start.store(q, std::memory_order_release);
  c.state.store(1, std::memory_order_release);
  CountingMemo memo{c};
  const uint8_t* next_start = nullptr;
  PageDropper dropper(src, base, q);
  for (;;) {
    if (next && q >= next->from) {
      if (!next_start) {
        int s;
        while ((s = next->state.load(std::memory_order_acquire)) == 0) {
          if (cancel.load(std::memory_order_relaxed)) return fail();
          std::this_thread::yield();
        }
        if (s < 0) return fail();
        next_start = next->start.load(std::memory_order_acquire);
      }
      if (q == next_start) break;
      if (q > next_start) return fail();
    }
    if (end - q < 1024) {
      if (next) return fail();
      break;  // near the end of the input: the trace ended before
    }
    if (dropper.step(q) && cancel.load(std::memory_order_relaxed)) return fail();
    uint8_t op = *q;
    switch (op) {
      case EMPTY_DICT:
        ++q;
        if (!walk_flat_dict(q, end, memo)) return fail();
        c.ops.push_back(EMPTY_DICT);
        break;
      case MARK:
      case APPENDS:
      case APPEND:
      case EMPTY_LIST:
        c.ops.push_back(op);
        ++q;
        break;
      case MEMOIZE:  // of a device's list
        c.ops.push_back(MEMOIZE);
        c.memo_ops.push_back(c.memos++);
        ++q;
        break;
      case FRAME:
        if (!frame_fits(q, end)) return fail();  // the full read gives the error
        q += 9;
        break;
      default:
        if (next) return fail();
        c.stop = q;  // the root dict's next key, or its SETITEMS
        dropper.all(q);
        c.state.store(2, std::memory_order_release);
        return;
    }
  }
  c.stop = q;
  dropper.all(q);
  c.state.store(2, std::memory_order_release);
}

bool Walkers::start(const ByteSource& src, const uint8_t* base, const uint8_t* from,
                    const uint8_t* end, uint64_t action_slot, size_t n, size_t gap) {
  if (action_slot < 256) {
    key_ = {static_cast<char>(BINGET), static_cast<char>(action_slot)};
  } else {
    key_ = {static_cast<char>(LONG_BINGET)};
    for (int b = 0; b < 4; ++b) key_.push_back(static_cast<char>((action_slot >> (8 * b)) & 0xff));
  }
  auto frames = frame_starts(src, base, end);
  auto left = static_cast<size_t>(end - from);
  std::vector<const uint8_t*> starts;
  for (size_t k = 1; k < n; ++k) {
    auto it = std::lower_bound(frames.begin(), frames.end(), from + left * k / n);
    if (it == frames.end() || static_cast<size_t>(end - *it) < gap) break;
    if (starts.empty() || *it > starts.back() + gap) starts.push_back(*it);
  }
  if (starts.empty()) return false;
  chunks_ = std::vector<Chunk>(starts.size());
  for (size_t k = 0; k < starts.size(); ++k) chunks_[k].from = starts[k];
  try {
    for (size_t k = 0; k < chunks_.size(); ++k)
      threads_.emplace_back(walk_chunk, std::ref(chunks_[k]),
                            k + 1 < chunks_.size() ? &chunks_[k + 1] : nullptr, end,
                            std::string_view(key_), std::cref(cancel_), std::cref(src), base);
  } catch (const std::system_error&) {
    stop();  // no threads to be had (a tight limit): the caller goes alone
    return false;
  }
  return true;
}

void Walkers::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Walkers::stop() {
  cancel_.store(true);
  join();
  cancel_.store(false);
  chunks_.clear();
}

std::vector<const uint8_t*> frame_starts(const ByteSource& src, const uint8_t* base,
                                         const uint8_t* end) {
  std::vector<const uint8_t*> out;
  auto size = static_cast<uint64_t>(end - base);
  uint8_t head[9];
  if (size < 11 || base[0] != PROTO || base[1] < 4) return out;
  for (uint64_t p = 2; src.peek_at(p, head, 9) && head[0] == FRAME;) {
    uint64_t n = load_le<uint64_t>(head + 1);
    if (n > size - p - 9) break;
    out.push_back(base + p + 9);
    p += 9 + n;
  }
  return out;
}

}  // namespace memsight::trace_walk
