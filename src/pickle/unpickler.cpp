// The unpickler's machine: the buffer it reads from, the memo, and the
// opcode loop (run). Lists and dicts are in containers.cpp, the fast paths
// for trace entries and frames in row_lane.cpp, opcodes it refuses in
// refused_opcodes.cpp.
#include "pickle/unpickler.h"

#include <algorithm>
#include <cstring>

#include "memsight/error.h"
#include "pickle/opcodes.h"

namespace memsight {
using namespace pickle_op;

Unpickler::Unpickler(ByteSource& src, StringTable& strings, DictHook* hook, Progress progress)
    : src_(src), strings_(strings), hook_(hook), progress_(std::move(progress)) {
  stack_.reserve(1024);
  std::string_view m = src_.mapped();
  if (!m.empty()) {
    // Parse the mapped file in place; refill() only ever reports the end.
    base_ = p_ = reinterpret_cast<const uint8_t*>(m.data());
    end_ = p_ + m.size();
    eof_ = true;
    next_release_ = p_ + kReleaseStep;
    return;
  }
  buf_.resize(1 << 20);
  base_ = p_ = end_ = reinterpret_cast<const uint8_t*>(buf_.data());
  next_release_ = reinterpret_cast<const uint8_t*>(~uintptr_t{0});  // progress comes from refill()
}

uint64_t Unpickler::offset() const { return buf_offset_ + static_cast<uint64_t>(p_ - base_); }

void Unpickler::release_consumed() {
  src_.release(offset());
  if (progress_) progress_(offset(), src_.total());
  next_release_ = p_ + kReleaseStep;
}

void Unpickler::fail(const std::string& what) const {
  throw Error("corrupted pickle at byte " + std::to_string(op_offset_) + ": " + what);
}

void Unpickler::refill(size_t need, bool hard) {
  // A length past the end of a plain input is corruption: say so before
  // trying to allocate room for it.
  if (hard && src_.compression().empty() && src_.total() && offset() + need > src_.total())
    throw Error("truncated pickle at byte " + std::to_string(src_.total()) + ": expected " +
                std::to_string(offset() + need - src_.total()) + " more bytes");
  if (buf_.empty()) {  // mapped input: nothing more to read
    if (hard && static_cast<size_t>(end_ - p_) < need)
      throw Error("truncated pickle at byte " + std::to_string(src_.total()) + ": expected " +
                  std::to_string(need - static_cast<size_t>(end_ - p_)) + " more bytes");
    return;
  }
  size_t left = static_cast<size_t>(end_ - p_);
  buf_offset_ += static_cast<uint64_t>(p_ - base_);
  if (left) std::memmove(buf_.data(), p_, left);
  size_t have = left;
  while (have < need && !eof_) {
    if (have == buf_.size()) {
      // One item longer than the buffer (a long string). Its length is only
      // a claim: grow by doubling as its bytes actually arrive, so a forged
      // length costs no more memory than the data behind it.
      buf_.resize(std::min(need, 2 * buf_.size()));
    }
    size_t k = src_.read(buf_.data() + have, buf_.size() - have);
    if (k == 0) eof_ = true;
    have += k;
  }
  auto* base = reinterpret_cast<uint8_t*>(buf_.data());
  p_ = base_ = base;
  end_ = base + have;
  if (have < need && hard)
    throw Error("truncated pickle at byte " + std::to_string(buf_offset_ + have) + ": expected " +
                std::to_string(need - have) + " more bytes");
  if (progress_ && src_.consumed() >= next_progress_) {
    progress_(src_.consumed(), src_.total());
    next_progress_ = src_.consumed() + (16 << 20);
  }
}

uint32_t Unpickler::new_node(Val::Tag tag) {
  uint32_t id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
    Node& n = nodes_[id];
    n.items.clear();
    n.memo = UINT32_MAX;
    n.gets = 0;
    n.is_converted = false;
    n.row_first = n.row_count = 0;
  } else {
    id = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  stack_.push_back(Val::make(tag, id));
  return id;
}

size_t Unpickler::pop_mark() {
  if (marks_.empty()) fail("MARK expected but none is open");
  size_t m = marks_.back();
  marks_.pop_back();
  if (m > stack_.size()) fail("stack underflow");
  return m;
}

void Unpickler::underflow(const char* op) const {
  fail(std::string(op) +
       (marks_.empty() ? " on an empty stack" : " takes a value from below a MARK"));
}

void Unpickler::push_long(const uint8_t* b, size_t n) {
  if (n == 0) {
    stack_.push_back(Val::integer(0));
    return;
  }
  if (n <= 8) {
    uint64_t u = 0;
    for (size_t i = 0; i < n; ++i) u |= uint64_t{b[i]} << (8 * i);
    if (n < 8 && (b[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
    auto v = static_cast<int64_t>(u);
    // An 8-byte LONG1 with the top bit clear is a positive int64.
    if (Val::fits_int(v)) {
      stack_.push_back(Val::integer(v));
      return;
    }
  }
  blobs_.emplace_back(reinterpret_cast<const char*>(b), n);
  stack_.push_back(Val::make(Val::Big, blobs_.size() - 1));
}

void Unpickler::memo_set(size_t idx, Val v) {
  uint64_t payload = v.payload();
  if (payload < (uint64_t{1} << 28)) {
    memo_[idx] = static_cast<uint32_t>((uint64_t{v.tag()} << 28) | payload);
    if (memo_[idx] != kWide) return;
  }
  memo_[idx] = kWide;
  memo_wide_[idx] = v;
}

void Unpickler::memo_put(uint64_t idx) {
  if (stack_.size() <= fence()) underflow("a memo store");
  Val v = stack_.back();
  if (idx < memo_.size()) {
    key_slots_ = {};  // a memo slot changes: cached keys may be stale
    ++memo_rewrites_;
    memo_set(idx, v);
  } else if (idx == memo_.size() && (sparse_memo_.empty() || !sparse_memo_.contains(idx))) {
    memo_.push_back(0);
    memo_set(idx, v);
  } else {
    // Past the end: a slot skipped is no value (pickle.loads refuses a read
    // of it), and MEMOIZE numbers the slots stored, so the dense slots stay
    // the stored ones.
    sparse_memo_[idx] = v;
    // Where it is, so that a conversion of the node updates the slot too
    // (convert_node); UINT32_MAX says none, so a node in that one slot is
    // kept as it is (never recycled: see convert_node).
    if (v.is_node()) {
      Node& n = nodes_[v.idx()];
      n.memo = static_cast<uint32_t>(std::min<uint64_t>(idx, UINT32_MAX));
      if (idx >= UINT32_MAX) ++n.gets;
    }
    return;
  }
  if (v.is_node()) nodes_[v.idx()].memo = static_cast<uint32_t>(idx);
}

Val Unpickler::memo_get(uint64_t idx) {
  Val v;
  if (idx < memo_.size()) {
    v = memo_at(idx);
  } else {
    auto it = sparse_memo_.find(idx);
    if (it == sparse_memo_.end()) fail("memo key " + std::to_string(idx) + " was never stored");
    v = it->second;
  }
  if (v.tag() == Val::Skipped) throw NeedsFullRead{};
  if (v.is_node()) {
    Node& n = nodes_[v.idx()];
    if (n.is_converted) return n.converted;
    ++n.gets;
  }
  return v;
}

Val Unpickler::run() {
  using T = Val::Tag;
  need(1);
  if (*p_ != PROTO) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "not a pickle (starts with byte 0x%02x)", *p_);
    throw Error(buf);
  }
  for (;;) {
    if (end_ - p_ < 16 && !eof_) refill(16, /*hard=*/false);
    if (p_ == end_)
      throw Error("truncated pickle at byte " + std::to_string(offset()) + ": ended before STOP");
    if (p_ >= par_check_) [[unlikely]]
      par_step();
    if (p_ >= next_release_) release_consumed();
    op_offset_ = offset();
    // Each pushed byte would otherwise cost 8 bytes of stack: a stream of
    // NONE or MARK opcodes must not grow memory without bound.
    if (stack_.size() + marks_.size() > kMaxStack) [[unlikely]]
      fail("more than " + std::to_string(kMaxStack) +
           " values wait on the pickle stack; not a memory snapshot");
    uint8_t op = *p_++;
    switch (op) {
      case PROTO: {
        need(1);
        uint8_t v = *p_++;
        if (v > 5) fail("unsupported pickle protocol " + std::to_string(v));
        break;
      }
      case FRAME: {
        // Its bytes are read as opcodes from here; where it ends is checked
        // at STOP (a cut file fails on the way, as it always did).
        need(8);
        const uint64_t n = load_le<uint64_t>(p_);
        p_ += 8;
        // The furthest end of any frame: pickle.loads refuses a frame
        // longer than the data at once, whatever frames follow it.
        frame_end_ = std::max(frame_end_, n > UINT64_MAX - offset() ? UINT64_MAX : offset() + n);
        break;
      }
      case STOP: {
        if (stack_.size() <= fence()) underflow("STOP");
        // pickle.loads refuses a frame longer than the data as truncated.
        if (frame_end_ > offset()) need(static_cast<size_t>(frame_end_ - offset()));
        if (progress_) progress_(src_.consumed(), src_.total());
        return stack_.back();
      }
      case MARK:
        marks_.push_back(stack_.size());
        break;
      case POP:
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();
        } else {
          if (stack_.size() <= fence()) underflow("POP");
          stack_.pop_back();
        }
        break;
      case POP_MARK:
        stack_.resize(pop_mark());
        break;
      case DUP:
        if (stack_.size() <= fence()) underflow("DUP");
        // A second holder, as a memo read makes one: the node is not
        // recycled when converted, and a change to it counts as shared.
        if (stack_.back().is_node()) ++nodes_[stack_.back().idx()].gets;
        stack_.push_back(stack_.back());
        break;
      case NONE:
        stack_.push_back(Val::make(T::None, 0));
        break;
      case NEWTRUE:
        stack_.push_back(Val::make(T::True, 0));
        break;
      case NEWFALSE:
        stack_.push_back(Val::make(T::False, 0));
        break;
      case BININT1:
        need(1);
        stack_.push_back(Val::integer(*p_++));
        break;
      case BININT2:
        need(2);
        stack_.push_back(Val::integer(load_le<uint16_t>(p_)));
        p_ += 2;
        break;
      case BININT:
        need(4);
        stack_.push_back(Val::integer(load_le<int32_t>(p_)));
        p_ += 4;
        break;
      case LONG1: {
        need(1);
        size_t n = *p_++;
        need(n);
        push_long(p_, n);
        p_ += n;
        break;
      }
      case LONG4: {
        need(4);
        int32_t n = load_le<int32_t>(p_);
        if (n < 0) fail("negative LONG4 length");
        p_ += 4;
        need(static_cast<size_t>(n));
        push_long(p_, static_cast<size_t>(n));
        p_ += n;
        break;
      }
      case BINFLOAT: {
        need(8);
        uint64_t u = 0;
        for (int i = 0; i < 8; ++i) u = (u << 8) | p_[i];  // big-endian
        double d;
        std::memcpy(&d, &u, 8);
        p_ += 8;
        floats_.push_back(d);
        stack_.push_back(Val::make(T::Float, floats_.size() - 1));
        break;
      }
      case SHORT_BINUNICODE:
      case BINUNICODE:
      case BINUNICODE8:
      case SHORT_BINBYTES:
      case BINBYTES:
      case BINBYTES8:
      case BYTEARRAY8: {
        size_t w = (op == SHORT_BINUNICODE || op == SHORT_BINBYTES) ? 1
                   : (op == BINUNICODE || op == BINBYTES)           ? 4
                                                                    : 8;
        need(w);
        uint64_t n = w == 1 ? *p_ : w == 4 ? load_le<uint32_t>(p_) : load_le<uint64_t>(p_);
        p_ += w;
        if (n > (uint64_t{1} << 40)) fail("string length " + std::to_string(n) + " is absurd");
        need(static_cast<size_t>(n));
        std::string_view s(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
        p_ += n;
        if (op == SHORT_BINUNICODE || op == BINUNICODE || op == BINUNICODE8) {
          stack_.push_back(Val::make(T::Str, strings_.intern(s)));
        } else {
          blobs_.emplace_back(s);
          stack_.push_back(Val::make(T::Bytes, blobs_.size() - 1));
        }
        break;
      }
      case EMPTY_DICT:
        if (frames_ && (try_row() || try_flat_dict())) break;
        new_node(T::Dict);
        break;
      case EMPTY_LIST:
        if (skip_key_ && at_value_of(skip_key_)) {
          skip_list();
          break;
        }
        if (par_key_ && !par_ && at_value_of(par_key_)) par_arm();
        new_node(T::List);
        break;
      case EMPTY_TUPLE:
        new_node(T::Tuple);
        break;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3:
      case TUPLE:
      case LIST:
      case DICT: {
        size_t from;
        if (op == TUPLE1 || op == TUPLE2 || op == TUPLE3) {
          size_t k = static_cast<size_t>(op - TUPLE1 + 1);
          if (stack_.size() < fence() + k) underflow("TUPLE1/2/3");
          from = stack_.size() - k;
        } else {
          from = pop_mark();
        }
        std::vector<Val> items(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
        stack_.resize(from);
        if (op == DICT) {
          if (items.size() % 2) fail("odd number of items for DICT");
          new_node(T::Dict);
          // Route through SETITEMS so the hook sees it.
          stack_.insert(stack_.end(), items.begin(), items.end());
          set_items(stack_.size() - items.size());
        } else {
          uint32_t id = new_node(op == LIST ? T::List : T::Tuple);
          nodes_[id].items = std::move(items);
        }
        break;
      }
      case APPEND: {
        if (stack_.size() < fence() + 2) underflow("APPEND");
        Val list = stack_[stack_.size() - 2];
        if (list.tag() != T::List || nodes_[list.idx()].is_converted)
          changed_after_use(list, "APPEND to something that is not a list");
        append_items(nodes_[list.idx()], &stack_.back(), 1);
        stack_.pop_back();
        break;
      }
      case APPENDS: {
        size_t from = pop_mark();
        if (from <= fence()) underflow("APPENDS");
        if (from == stack_.size()) break;  // nothing to append: pickle.loads checks no type then
        Val list = stack_[from - 1];
        if (list.tag() != T::List || nodes_[list.idx()].is_converted)
          changed_after_use(list, "APPENDS to something that is not a list");
        append_items(nodes_[list.idx()], stack_.data() + from, stack_.size() - from);
        stack_.resize(from);
        break;
      }
      case SETITEM:
        if (stack_.size() < fence() + 3) underflow("SETITEM");
        set_items(stack_.size() - 2);
        break;
      case SETITEMS:
        set_items(pop_mark());
        break;
      case MEMOIZE:
        memo_put(memo_.size() + sparse_memo_.size());
        break;
      case BINPUT:
        need(1);
        memo_put(*p_++);
        break;
      case LONG_BINPUT:
        need(4);
        memo_put(load_le<uint32_t>(p_));
        p_ += 4;
        break;
      case BINGET:
        need(1);
        stack_.push_back(memo_get(*p_++));
        break;
      case LONG_BINGET:
        need(4);
        stack_.push_back(memo_get(load_le<uint32_t>(p_)));
        p_ += 4;
        break;
      default:
        refuse_opcode(op, op_offset_);
    }
  }
}

}  // namespace memsight
