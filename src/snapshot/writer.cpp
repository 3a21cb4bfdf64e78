// Model -> protocol-4 pickle that pickle.load turns back into the dicts torch
// wrote. Layout of what we emit:
//
//   PROTO 4, then FRAMEs of ~64 KiB (as Python's pickler cuts them), each
//   closed before a segment, block or trace entry
//   EMPTY_DICT                                  top-level dict
//     MARK 'segments' [segments...] 'device_traces' [[entries...]...] ... SETITEMS
//   entry:  EMPTY_DICT MEMOIZE MARK key value ... SETITEMS
//   frames: a list per stack, memoised, so identical stacks share one object
//           (as torch's de-duplicated tracebacks do); frame dicts memoised too.
//
// Strings are memoised on first use and read back with BINGET afterwards.
#include <cstring>
#include <unordered_map>

#include "input/source.h"
#include "memsight/reader.h"

namespace memsight {
namespace {

class Pickler {
 public:
  explicit Pickler(const Snapshot& snap, bool segments_only = false)
      : snap_(snap), segments_only_(segments_only) {}

  std::string run() {
    count_shared();
    out_.reserve(1 << 20);
    op(0x80);
    op(4);
    open_frame();
    if (snap_.legacy_segment_list || segments_only_) {
      segments();
    } else {
      op('}');
      op('(');
      size_t n = 0;
      for (const std::string& k : snap_.top_keys) {
        flush_batch(n);
        str(k);
        if (k == "segments") {
          segments();
        } else if (k == "device_traces") {
          traces();
        } else if (const PyValue* v = snap_.top(k)) {
          value(*v);
        } else {
          op('N');
        }
      }
      if (snap_.top_keys.empty()) {  // a model built in code
        str("segments");
        segments();
        str("device_traces");
        traces();
      }
      op('u');
    }
    op('.');
    close_frame();
    return std::move(out_);
  }

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

  // A container written more than once (one the model shares: read through
  // the memo from the file) is written once and memoised; later holders
  // read it back, so a 200-byte pickle of nested references stays that
  // small. What counts is how often the output holds it, not how many
  // values in the model do: reading the output back then shares exactly
  // these again, and writing that gives the same bytes. An empty one is
  // written each time (one byte, less than a memo read).
  //
  // Counted before writing, over every value the output holds (top-level
  // values, the unknown keys of segments, blocks and trace entries, and of
  // the frames the written stacks name); a shared container's items once.
  void count_shared() {
    std::vector<bool> seen(snap_.frames.extras.size());  // a frame is written once
    auto stack = [&](ShapeId shape, StackId s) {
      if (seen.empty() || !shape_has(snap_, shape, Field::Frames)) return;
      for (FrameId f : snap_.frames.stack(s))
        if (uint32_t x = snap_.frames.frame(f).extra; x && !seen[x - 1]) {
          seen[x - 1] = true;
          count(snap_.frames.extras[x - 1]);
        }
    };
    auto segments = [&] {
      for (const auto& xs : snap_.extras)  // of segments and blocks
        for (const PyValue& x : xs) count(x);
      for (const Segment& seg : snap_.segments) {
        stack(seg.shape, seg.stack);
        for (const Block& b : snap_.segment_blocks(seg)) stack(b.shape, b.stack);
      }
    };
    auto traces = [&] {
      for (const auto& [row, xs] : snap_.trace.extras)
        for (const PyValue& x : xs) count(x);
      for (size_t r = 0; r < snap_.trace.rows(); ++r)
        stack(snap_.trace.shape[r], snap_.trace.stack[r]);
    };
    // In the order and as often as run() writes them.
    if (snap_.legacy_segment_list || segments_only_) return segments();
    for (const std::string& k : snap_.top_keys) {
      if (k == "segments") {
        segments();
      } else if (k == "device_traces") {
        traces();
      } else if (const PyValue* v = snap_.top(k)) {
        count(*v);
      }
    }
    if (snap_.top_keys.empty()) {
      segments();
      traces();
    }
  }
  void count(const PyValue& v) {
    if (v.kind != PyValue::Kind::List && v.kind != PyValue::Kind::Tuple &&
        v.kind != PyValue::Kind::Dict)
      return;
    if (v.items.empty() || plain_frame(v)) return;
    if (v.items.holders() >= 2 && ++written_[v.items.identity()] > 1) return;
    for (const PyValue& item : v.items) count(item);
  }
  bool shared(const PyValue& v) const {
    if (v.items.empty()) return false;
    auto it = written_.find(v.items.identity());
    return it != written_.end() && it->second >= 2;
  }
  bool shared_seen(const PyValue& v) {
    if (!shared(v)) return false;
    auto it = shared_memo_.find(v.items.identity());
    if (it == shared_memo_.end()) return false;
    memo_get(it->second);
    return true;
  }
  void remember_shared(const PyValue& v) {
    if (shared(v)) shared_memo_.emplace(v.items.identity(), memoize());
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

  void value(const PyValue& v) {
    using K = PyValue::Kind;
    switch (v.kind) {
      case K::None:
        op('N');
        break;
      case K::Bool:
        op(v.b ? 0x88 : 0x89);
        break;
      case K::Int:
        integer(v.i);
        break;
      case K::BigInt:
        if (v.s.size() < 256) {
          op(0x8a);
          op(static_cast<uint8_t>(v.s.size()));
        } else {
          op(0x8b);
          auto n = static_cast<int32_t>(v.s.size());
          raw(&n, 4);
        }
        raw(v.s.data(), v.s.size());
        break;
      case K::Float: {
        op('G');
        uint64_t u;
        std::memcpy(&u, &v.f, 8);
        for (int i = 7; i >= 0; --i) op(static_cast<uint8_t>(u >> (8 * i)));
        break;
      }
      case K::Str: {
        // One text held by many values (a memo read in the file it came
        // from) is written once and read back by reference.
        auto [it, inserted] = shared_memo_.try_emplace(v.s.identity(), 0);
        if (!inserted) return memo_get(it->second);
        it->second = str_slot(v.s);
        break;
      }
      case K::Bytes: {
        op('B');
        auto n = static_cast<uint32_t>(v.s.size());
        raw(&n, 4);
        raw(v.s.data(), v.s.size());
        break;
      }
      case K::List: {
        if (shared_seen(v)) break;
        op(']');
        remember_shared(v);
        if (v.items.empty()) break;
        op('(');
        size_t n = 0;
        for (const PyValue& item : v.items) {
          flush_batch(n, 'e');
          value(item);
        }
        op('e');
        break;
      }
      case K::Tuple: {
        if (v.items.empty()) {
          op(')');
          break;
        }
        if (shared_seen(v)) break;
        if (v.items.size() > 3) op('(');
        for (const PyValue& item : v.items) value(item);
        op(v.items.size() == 1   ? 0x85
           : v.items.size() == 2 ? 0x86
           : v.items.size() == 3 ? 0x87
                                 : 't');
        remember_shared(v);  // a tuple is memoised once built, as Python does
        break;
      }
      case K::Dict: {
        if (shared_seen(v)) break;
        if (plain_frame(v)) {
          plain_frame_value(v);
          break;
        }
        op('}');
        remember_shared(v);
        if (v.items.empty()) break;
        op('(');
        size_t n = 0;
        for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
          flush_batch(n);
          value(v.items[i]);
          value(v.items[i + 1]);
        }
        op('u');
        break;
      }
    }
  }

  // A value that is a dict as torch writes a frame ({'name': str,
  // 'filename': str, 'line': int}). The reader makes every such dict one
  // interned frame, whatever shared it in the file, so it is written by
  // what it says, not by which values share it: once, and read back from
  // the memo after.
  static bool plain_frame(const PyValue& v) {
    using K = PyValue::Kind;
    const PyItems& it = v.items;
    return v.kind == K::Dict && it.size() == 6 && it[0].kind == K::Str && it[0].s == "name" &&
           it[1].kind == K::Str && it[2].kind == K::Str && it[2].s == "filename" &&
           it[3].kind == K::Str && it[4].kind == K::Str && it[4].s == "line" &&
           it[5].kind == K::Int && it[5].i >= -(int64_t{1} << 59) && it[5].i < (int64_t{1} << 59);
  }
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
  void plain_frame_value(const PyValue& v) {
    FrameText key{v.items[1].s, v.items[3].s, v.items[5].i};
    auto [it, inserted] = frame_values_.try_emplace(key, 0);
    if (!inserted) {
      memo_get(it->second);
    } else {
      op('}');
      it->second = memoize();
      op('(');
      for (const PyValue& x : v.items) value(x);
      op('u');
    }
    shared_memo_.emplace(v.items.identity(), it->second);  // later holders: no hashing
  }

  void frame(FrameId id) {
    auto it = frame_memo_.find(id);
    if (it != frame_memo_.end()) return memo_get(it->second);
    const Frame& f = snap_.frames.frame(id);
    if (f.extra) {
      value(snap_.frames.extras[f.extra - 1]);
      frame_memo_.emplace(id, memoize());
      return;
    }
    // Memoise the dict before its items, as Python does.
    op('}');
    frame_memo_.emplace(id, memoize());
    op('(');
    str("name");
    str(f.name);
    str("filename");
    str(f.filename);
    str("line");
    integer(f.line);
    op('u');
  }

  void stack(StackId id) {
    auto it = stack_memo_.find(id);
    if (it != stack_memo_.end()) return memo_get(it->second);
    op(']');
    auto frames = snap_.frames.stack(id);
    // Memoise the list before its items, as Python does.
    uint32_t slot = memoize();
    if (!frames.empty()) {
      op('(');
      size_t n = 0;
      for (FrameId f : frames) {
        flush_batch(n, 'e');
        frame(f);
      }
      op('e');
    }
    stack_memo_.emplace(id, slot);
  }

  void extra_pair(StrId key, const PyValue& v) {
    if (key == 0 && v.kind == PyValue::Kind::Tuple && v.items.size() == 2) {
      value(v.items[0]);
      value(v.items[1]);
    } else {
      str(key);
      value(v);
    }
  }

  void segments() {
    op(']');
    if (snap_.segments.empty()) return;
    op('(');
    size_t n = 0;
    for (const Segment& s : snap_.segments) {
      flush_batch(n, 'e');
      frame_boundary();
      op('}');
      memoize();
      op('(');
      size_t xi = 0;
      for (const ShapeKey& k : snap_.shapes.get(s.shape)) {
        if (k.field == Field::Extra) {
          extra_pair(k.key, snap_.extras[s.extra - 1][xi++]);
          continue;
        }
        str(k.key);
        switch (k.field) {
          case Field::Device:
            integer(s.device);
            break;
          case Field::Address:
            integer(s.address);
            break;
          case Field::TotalSize:
            integer(s.total_size);
            break;
          case Field::AllocatedSize:
            integer(s.allocated_size);
            break;
          case Field::ActiveSize:
            integer(s.active_size);
            break;
          case Field::RequestedSize:
            integer(s.requested_size);
            break;
          case Field::Stream:
            integer(s.stream);
            break;
          case Field::SegmentType:
            str(s.segment_type);
            break;
          case Field::SegmentPoolId:
            integer(s.pool_id[0]);
            integer(s.pool_id[1]);
            op(0x86);
            break;
          case Field::IsExpandable:
            op(s.is_expandable ? 0x88 : 0x89);
            break;
          case Field::Frames:
            stack(s.stack);
            break;
          case Field::Blocks:
            blocks(s);
            break;
          default:
            op('N');
            break;
        }
      }
      op('u');
    }
    op('e');
  }

  void blocks(const Segment& s) {
    op(']');
    auto bl = snap_.segment_blocks(s);
    if (bl.empty()) return;
    op('(');
    size_t n = 0;
    for (const Block& b : bl) {
      flush_batch(n, 'e');
      frame_boundary();
      op('}');
      memoize();
      op('(');
      size_t xi = 0;
      for (const ShapeKey& k : snap_.shapes.get(b.shape)) {
        if (k.field == Field::Extra) {
          extra_pair(k.key, snap_.extras[b.extra - 1][xi++]);
          continue;
        }
        str(k.key);
        switch (k.field) {
          case Field::Address:
            integer(b.address);
            break;
          case Field::Size:
            integer(b.size);
            break;
          case Field::RequestedSize:
            integer(b.requested_size);
            break;
          case Field::State:
            str(b.state_name);
            break;
          case Field::Frames:
            stack(b.stack);
            break;
          default:
            op('N');
            break;
        }
      }
      op('u');
    }
    op('e');
  }

  // A trace entry's value, by its field's kind (trace_fields.h).
  template <TraceKind K>
  void cell(uint32_t row, TraceCell<K> v) {
    if constexpr (K == TraceKind::Action) {
      auto it = snap_.trace.action_name.find(row);
      if (it != snap_.trace.action_name.end())
        str(it->second);
      else
        str(action_name(v));
    } else if constexpr (K == TraceKind::Int) {
      integer(v);
    } else if constexpr (K == TraceKind::Str) {
      str(v);
    } else {
      stack(v);
    }
  }

  void traces() {
    const TraceTable& t = snap_.trace;
    op(']');
    if (snap_.device_count() == 0) return;
    op('(');
    size_t nd = 0;
    for (size_t d = 0; d < snap_.device_count(); ++d) {
      flush_batch(nd, 'e');
      auto [begin, end] = snap_.device_rows(d);
      op(']');
      if (begin == end) continue;
      op('(');
      size_t n = 0;
      for (uint32_t r = begin; r < end; ++r) {
        flush_batch(n, 'e');
        frame_boundary();
        op('}');
        memoize();
        op('(');
        const std::vector<PyValue>* extras = nullptr;
        if (auto it = t.extras.find(r); it != t.extras.end()) extras = &it->second;
        size_t xi = 0;
        for (const ShapeKey& k : snap_.shapes.get(t.shape[r])) {
          if (k.field == Field::Extra) {
            extra_pair(k.key, (*extras)[xi++]);
            continue;
          }
          str(k.key);
          switch (k.field) {
#define MEMSIGHT_WRITE_CASE(Name, key, column, Kind) \
  case Field::Name:                                  \
    cell<TraceKind::Kind>(r, t.column[r]);           \
    break;
            MEMSIGHT_TRACE_FIELDS(MEMSIGHT_WRITE_CASE)
#undef MEMSIGHT_WRITE_CASE
            default:
              op('N');
              break;
          }
        }
        op('u');
      }
      op('e');
    }
    op('e');
  }

  const Snapshot& snap_;
  const bool segments_only_;
  std::string out_;
  size_t frame_at_ = 0;
  uint32_t memo_count_ = 0;
  std::vector<uint32_t> id_memo_;
  StringTable local_strings_;
  std::vector<uint32_t> local_memo_;
  std::unordered_map<FrameId, uint32_t> frame_memo_;
  std::unordered_map<StackId, uint32_t> stack_memo_;
  // Memo slots of shared texts and containers, by the buffer they share.
  std::unordered_map<const void*, uint32_t> shared_memo_;
  // How often the output holds each container the model shares.
  std::unordered_map<const void*, uint32_t> written_;
  // Memo slots of frames written as values, by what they say.
  std::unordered_map<FrameText, uint32_t, FrameTextHash> frame_values_;
};

}  // namespace

std::string pickle_snapshot(const Snapshot& snap) { return Pickler(snap).run(); }
std::string pickle_segments(const Snapshot& snap) { return Pickler(snap, true).run(); }

void write_snapshot_file(const Snapshot& snap, const std::string& path) {
  std::string method = compression_for_name(path);  // refused before any work
  std::string data = pickle_snapshot(snap);
  if (!method.empty()) data = compress(data, method);
  write_file_atomic(path, data);
}

}  // namespace memsight
