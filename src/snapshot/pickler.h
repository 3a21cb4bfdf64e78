#pragma once
// The snapshot pickler: the model as the protocol-4 pickle torch writes
// (writer.cpp draws the layout). The bytes, frames, memo and scalars are
// here, inline, as every trace entry uses them; the layout of the snapshot
// is written by writer.cpp, values the model keeps verbatim by
// write_values.cpp, and which containers the output shares is counted
// first by write_sharing.cpp.
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "memsight/snapshot.h"
#include "snapshot/value_keys.h"

namespace memsight::write {

class Pickler {
 public:
  explicit Pickler(const Snapshot& snap, bool segments_only = false)
      : snap_(snap), segments_only_(segments_only) {}

  std::string run();

 private:
  // Framing: a FRAME op's 9 bytes are set aside where a frame starts, and
  // filled in with its length when it closes. Readers may start a thread at
  // each frame (the parallel trace decode), so big pickles are framed.
  static constexpr size_t kFrameTarget = 64 << 10;
  void open_frame() {
    frame_at_ = out_.size();
    out_.append(9, '\0');
  }
  void close_frame() {
    uint64_t n = out_.size() - frame_at_ - 9;
    out_[frame_at_] = static_cast<char>(0x95);
    std::memcpy(&out_[frame_at_ + 1], &n, 8);  // little-endian, as pickle is
  }
  // Before a segment, block or entry: a new frame once this one is full.
  void frame_boundary() {
    if (out_.size() - frame_at_ - 9 < kFrameTarget) return;
    close_frame();
    open_frame();
  }

  void op(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  // Python batches SETITEMS/APPENDS by 1000; any batch size is valid, but
  // matching keeps our pickles looking like Python's.
  void flush_batch(size_t& n, char close = 'u') {
    if (n && n % 1000 == 0) {
      op(static_cast<uint8_t>(close));
      op('(');
    }
    ++n;
  }

  void memo_get(uint32_t idx) {
    if (idx < 256) {
      op('h');
      op(static_cast<uint8_t>(idx));
    } else {
      op('j');
      raw(&idx, 4);
    }
  }
  uint32_t memoize() {
    op(0x94);
    return memo_count_++;
  }

  // Strings of the model are memoised by id, others through a local table.
  void str(StrId id) {
    if (id >= id_memo_.size()) id_memo_.resize(snap_.strings.size(), UINT32_MAX);
    if (id_memo_[id] != UINT32_MAX) return memo_get(id_memo_[id]);
    id_memo_[id] = emit_str(snap_.str(id));
  }
  void str(std::string_view s) { str_slot(s); }
  // Writes s (or a memo read of it); returns its memo slot.
  uint32_t str_slot(std::string_view s) {
    StrId local = local_strings_.intern(s);
    if (local >= local_memo_.size()) local_memo_.resize(local + 1, UINT32_MAX);
    if (local_memo_[local] != UINT32_MAX) {
      memo_get(local_memo_[local]);
      return local_memo_[local];
    }
    return local_memo_[local] = emit_str(s);
  }

  uint32_t emit_str(std::string_view s) {
    if (s.size() < 256) {
      op(0x8c);
      op(static_cast<uint8_t>(s.size()));
    } else {
      op('X');
      auto n = static_cast<uint32_t>(s.size());
      raw(&n, 4);
    }
    raw(s.data(), s.size());
    return memoize();
  }

  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      op(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      op('M');
      auto u = static_cast<uint16_t>(v);
      raw(&u, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      auto u = static_cast<int32_t>(v);
      raw(&u, 4);
    } else {
      // LONG1 with the fewest two's complement bytes, as Python writes it.
      uint8_t bytes[8];
      auto u = static_cast<uint64_t>(v);
      for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(u >> (8 * i));
      int n = 8;
      while (n > 1 && ((bytes[n - 1] == 0 && !(bytes[n - 2] & 0x80)) ||
                       (bytes[n - 1] == 0xff && (bytes[n - 2] & 0x80))))
        --n;
      op(0x8a);
      op(static_cast<uint8_t>(n));
      raw(bytes, static_cast<size_t>(n));
    }
  }

  // The snapshot's layout (writer.cpp).
  void frame(FrameId id);
  void stack(StackId id);
  void extra_pair(StrId key, const PyValue& v);
  void segments();
  void blocks(const Segment& s);
  void traces();
  template <TraceKind K>
  void cell(uint32_t row, TraceCell<K> v);

  // Values kept verbatim (write_values.cpp).
  void value(const PyValue& v);
  static bool plain_frame(const PyValue& v);
  void plain_frame_value(const PyValue& v);
  struct FrameText {
    std::string_view name, filename;
    int64_t line;
    bool operator==(const FrameText&) const = default;
  };
  struct FrameTextHash {
    size_t operator()(const FrameText& f) const {
      return std::hash<std::string_view>()(f.name) * 31 +
             std::hash<std::string_view>()(f.filename) * 17 + static_cast<size_t>(f.line);
    }
  };

  // Containers the output holds more than once, by what they say
  // (write_sharing.cpp).
  void count_shared();
  void count(const PyValue& v);
  bool shared(const PyValue& v);
  bool shared_seen(const PyValue& v);
  void remember_shared(const PyValue& v);
  uint64_t frame_key(FrameId id);
  uint32_t stack_key(StackId id);

  const Snapshot& snap_;
  const bool segments_only_;
  std::string out_;
  size_t frame_at_ = 0;
  uint32_t memo_count_ = 0;
  std::vector<uint32_t> id_memo_;
  StringTable local_strings_;
  std::vector<uint32_t> local_memo_;
  // Memo slots of frames and stacks, by frame_key and stack_key.
  std::unordered_map<uint64_t, uint32_t> frame_memo_;
  std::unordered_map<StackId, uint32_t> stack_memo_;
  // Memo slots of texts of values, by the buffer they share (a shortcut:
  // str_slot finds them by what they say).
  std::unordered_map<const void*, uint32_t> text_memo_;
  // What containers say; how often the output holds each, and the memo
  // slots of those held more than once.
  ValueKeys keys_;
  std::unordered_map<uint32_t, uint32_t> written_;
  std::unordered_map<uint32_t, uint32_t> shared_memo_;
  // Stacks by what their frames say, where some frame is kept whole.
  std::vector<uint32_t> stack_keys_;
  // Memo slots of frames written as values, by what they say.
  std::unordered_map<FrameText, uint32_t, FrameTextHash> frame_values_;
};

}  // namespace memsight::write
