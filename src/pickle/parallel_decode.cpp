// Decoding a big trace on several threads, without a first pass.
//
// A full read of a framed (protocol 4+) snapshot spends most of its time on
// the trace entries. Once the main thread is a little way into a big trace
// list (the entries' keys are memoised by then), the rest of the input is
// cut into parts at pickle frame boundaries, which are opcode boundaries,
// and the parts are dealt round-robin to the main thread and the helpers.
// The main thread decodes its parts as it goes. A helper's part is a share:
// the helper finds its first entry and decodes entries from there into
// local tables (row_chunks.cpp), until the next part's first entry. It
// holds two shares at most: for its third, it waits until the main thread
// is done with its first, and reuses that share's tables.
//
// A helper does not know how many memo slots and rows come before its
// share, so its memo slots and rows are numbered from zero, and a memo read
// of a slot stored after the helpers started is kept as pending: a slot the
// main thread (or an earlier share) stores later, or one of the share's
// own. When the main thread stands exactly on a share's first entry, it
// knows both numbers: it checks every pending read (the slot exists and
// holds what the entry needs), interns what is new in the share in file
// order (so every id comes out as a one-thread read makes it), appends the
// share's memo slots and rows, replays its list operations on the stack,
// and goes on from where the share stopped.
//
// Nothing is changed before those checks pass. A share that fails them,
// whose first entry the main thread does not land on, or that stopped early
// (an entry its helper does not decode) costs nothing but its helper's
// time: the main thread decodes on from where it stands, so the result, or
// the error, is always the one-thread read's.
#include <algorithm>
#include <memory>
#include <system_error>
#include <thread>

#include "pickle/opcodes.h"
#include "pickle/row_chunks.h"
#include "pickle/trace_walk.h"
#include "pickle/unpickler.h"
#include "util/escape.h"
#include "util/parallel.h"

namespace memsight {
using namespace pickle_op;
using namespace row_chunks;

struct Unpickler::Parallel {
  const uint8_t* launch_at = nullptr;
  bool launched = false;
  bool took = false;  // a share was taken
  size_t threads = 1;
  Context ctx;
  std::vector<std::unique_ptr<Share>> shares;
  size_t next = 0;  // the next share the main thread may take
  uint64_t memo_rewrites = 0;
  std::vector<std::thread> helpers;

  void join() {
    for (auto& t : helpers)
      if (t.joinable()) t.join();
    helpers.clear();
  }
  // Stops the helpers: none waits for a share the main thread will not
  // get to.
  void stop() {
    for (auto& s : shares) {
      s->cancel.store(true);
      s->released.store(true);
      s->released.notify_all();
    }
    join();
  }
  ~Parallel() { stop(); }
};

void Unpickler::ParallelDeleter::operator()(Parallel* p) const { delete p; }

namespace {
const uint8_t* const kNever = reinterpret_cast<const uint8_t*>(~uintptr_t{0});
}  // namespace

// A share's refs, translated to global ids once the main thread has
// interned what is new in it.
struct Unpickler::ShareIds {
  std::vector<uint32_t> resolved;       // pending read -> global id (reads of earlier slots)
  std::vector<uint32_t> pending_local;  // pending read -> local id (reads of the share's own slots)
  std::vector<uint32_t> str, frame, stack;
  std::vector<ShapeId> shape;
  uint32_t tr(uint32_t r, const std::vector<uint32_t>& local) const {
    uint32_t x = ref_payload(r);
    switch (ref_kind(r)) {
      case kGlobal:
        return x;
      case kLocal:
        return local[x];
      default:
        return pending_local[x] != UINT32_MAX ? local[pending_local[x]] : resolved[x];
    }
  }
  // A trace cell of the share, with its ids global (trace_fields.h).
  template <TraceKind K>
  TraceCell<K> cell(TraceCell<K> v) const {
    if constexpr (K == TraceKind::Str)
      return tr(v, str);
    else if constexpr (K == TraceKind::Stack)
      return tr(v, stack);
    else
      return v;
  }
};

void Unpickler::par_arm() {
  // Mapped input only (helpers read the mapping), with the fast paths on.
  if (!buf_.empty() || !eof_ || !frames_ || !hook_ || !hook_->trace_table() ||
      !sparse_memo_.empty())
    return;
  size_t share = decode_stats::share_bytes.load();
  if (static_cast<size_t>(end_ - p_) < 2 * share) return;
  par_.reset(new Parallel);
  // Start the helpers a little way in, once the entries' keys are memoised.
  par_->launch_at = p_ + std::min<size_t>(256 << 10, share / 4);
  par_check_ = par_->launch_at;
}

bool Unpickler::par_launch() {
  Parallel& P = *par_;
  P.launched = true;
  uint64_t slot = action_slot();  // the entries' first key is a memo read by now
  if (!sparse_memo_.empty() || slot == UINT64_MAX) return false;
  size_t threads = std::min<size_t>(threads_allowed(), 32);
  size_t share = std::max<size_t>(decode_stats::share_bytes.load(), 4096);
  auto left = static_cast<size_t>(end_ - p_);
  // The rest is cut into parts, dealt round-robin to the main thread and
  // the helpers, up to four rounds (a helper holds two shares at most, so
  // rounds bound the memory of a big trace). The main thread's parts are a
  // little smaller: it also takes the shares.
  size_t parts = std::min({left / share, 4 * threads, size_t{256}});
  if (threads < 2 || parts < 2) return false;
  P.threads = threads;
  std::vector<const uint8_t*> frames = trace_walk::frame_starts(src_, base_, end_);
  std::vector<const uint8_t*> bounds{p_};
  double total = 0;
  for (size_t k = 0; k < parts; ++k) total += k % threads == 0 ? 0.9 : 1.0;
  double at = 0;
  for (size_t k = 1; k < parts; ++k) {
    at += (k - 1) % threads == 0 ? 0.9 : 1.0;
    auto it = std::lower_bound(frames.begin(), frames.end(),
                               p_ + static_cast<size_t>(static_cast<double>(left) * at / total));
    if (it == frames.end() || static_cast<size_t>(end_ - *it) < share / 4) break;
    if (*it > bounds.back() + share / 4) bounds.push_back(*it);
  }
  if (bounds.size() < 2) return false;
  Context& ctx = P.ctx;
  ctx.src = &src_;
  ctx.base = base_;
  ctx.end = end_;
  ctx.memo.assign(memo_.begin(), memo_.end());
  ctx.row_key_of = row_key_of_;
  for (size_t id = 0; id < row_key_of_.size(); ++id)
    if (row_key_of_[id] != kRowNone)
      ctx.row_key_names.emplace_back(std::string(strings_.get(static_cast<StrId>(id))),
                                     row_key_of_[id]);
  ctx.action_of.resize(strings_.size());
  for (size_t id = 0; id < strings_.size(); ++id)
    ctx.action_of[id] = parse_action(strings_.get(static_cast<StrId>(id)));
  ctx.name_key = name_key_;
  ctx.filename_key = filename_key_;
  ctx.line_key = line_key_;
  if (slot < 256) {
    ctx.entry_key = {static_cast<char>(BINGET), static_cast<char>(slot)};
  } else {
    ctx.entry_key = {static_cast<char>(LONG_BINGET)};
    for (int b = 0; b < 4; ++b)
      ctx.entry_key.push_back(static_cast<char>((slot >> (8 * b)) & 0xff));
  }
  P.memo_rewrites = memo_rewrites_;
  // Part k goes to thread k % threads (0: the main thread, which decodes
  // its parts as it goes).
  std::vector<std::vector<Share*>> mine(threads);
  for (size_t k = 1; k < bounds.size(); ++k) {
    if (k % threads == 0) continue;
    P.shares.push_back(std::make_unique<Share>());
    Share& sh = *P.shares.back();
    sh.from = bounds[k];
    sh.limit = k + 1 < bounds.size() ? bounds[k + 1] : nullptr;
    mine[k % threads].push_back(&sh);
  }
  try {
    for (size_t t = 1; t < threads; ++t)
      if (!mine[t].empty()) P.helpers.emplace_back(decode_shares, mine[t], std::cref(ctx));
  } catch (const std::system_error&) {  // no threads to be had (a tight limit): alone
    P.stop();
    P.shares.clear();
    return false;
  }
  return true;
}

void Unpickler::par_step() {
  Parallel& P = *par_;
  if (!P.launched) {
    if (!par_launch()) {
      par_check_ = kNever;
      return;
    }
  }
  while (P.next < P.shares.size()) {
    Share& s = *P.shares[P.next];
    if (p_ < s.from) {
      par_check_ = s.from;
      return;
    }
    // Waiting blocks: on a busy machine a spinning main thread would take
    // the core from the helper it waits for.
    int state;
    while ((state = s.state.load(std::memory_order_acquire)) == 0) s.state.wait(0);
    if (state > 0 && p_ < s.start) {
      par_check_ = s.start;
      return;
    }
    ++P.next;
    auto done = [&s] {  // its helper may go on to its next share
      s.released.store(true, std::memory_order_release);
      s.released.notify_all();
    };
    if (state < 0 || p_ > s.start) {  // no entry found, or not where this thread is
      s.cancel.store(true);
      done();
      continue;
    }
    while ((state = s.state.load(std::memory_order_acquire)) != 2) s.state.wait(state);
    bool taken = par_take(s);
    done();
    if (!taken) {
      ++decode_stats::shares_refused;
      continue;  // decoded here instead, from where the share starts
    }
    if (!P.took) ++decode_stats::parallel_decodes;
    if (s.cut) ++decode_stats::shares_cut;
    P.took = true;
    p_ = s.stop;
  }
  par_check_ = kNever;
  P.join();
  P.shares.clear();
}

// Whether the share's list operations, replayed on the stack as it is,
// would act on lists where the VM's would.
bool Unpickler::share_fits_stack(const Share& s) const {
  std::vector<uint8_t> lists(stack_.size());
  for (size_t i = 0; i < stack_.size(); ++i)
    lists[i] = stack_[i].tag() == Val::List && !nodes_[stack_[i].idx()].is_converted;
  std::vector<size_t> marks = marks_;
  auto fence = [](const std::vector<size_t>& m) { return m.empty() ? size_t{0} : m.back(); };
  for (uint8_t op : s.ops) {
    switch (op) {
      case EMPTY_DICT:
        lists.push_back(0);
        break;
      case EMPTY_LIST:
        lists.push_back(1);
        break;
      case MARK:
        marks.push_back(lists.size());
        break;
      case MEMOIZE:  // as the VM, no value below the last mark is taken
        if (lists.size() <= fence(marks)) return false;
        break;
      case APPENDS: {
        if (marks.empty()) return false;
        size_t from = marks.back();
        marks.pop_back();
        if (from <= fence(marks) || from > lists.size() || !lists[from - 1]) return false;
        lists.resize(from);
        break;
      }
      case APPEND:
        if (lists.size() < fence(marks) + 2 || !lists[lists.size() - 2]) return false;
        lists.pop_back();
        break;
      default:
        return false;
    }
  }
  return true;
}

// The main thread stands on the share's first entry, and the share is
// decoded: checks it, then appends it to the model. False (nothing
// changed) when the share cannot be taken as it is.
bool Unpickler::par_take(Share& s) {
  Parallel& P = *par_;
  const size_t nrows = s.rows.rows();
  if (s.stop == s.start || !sparse_memo_.empty() || memo_rewrites_ != P.memo_rewrites) return false;
  const uint64_t memo_base = memo_.size(), row_base = hook_->trace_table()->rows();
  if (row_base + nrows >= (uint64_t{1} << 28) || memo_base + s.memo.size() >= (uint64_t{1} << 32))
    return false;
  if (strings_.size() + s.strings.size() >= (1u << 28) ||
      frames_->frame_count() + s.frames.size() >= (1u << 28) ||
      frames_->stack_count() + s.stacks.stack_count() >= (1u << 28))
    return false;  // ids too wide for a memo slot: rare, left to this thread
  if (!share_fits_stack(s)) return false;
  ShareIds id;
  if (!par_resolve(s, id)) return false;
  // From here on the model grows.
  par_intern(s, id);
  par_fill(s, id, memo_base, row_base);
  par_replay(s, memo_base, row_base);
  return true;
}

// Every pending read of the share: a slot that exists, holding what the
// entry needs; false when one does not (the share is decoded again here).
bool Unpickler::par_resolve(const Share& s, ShareIds& id) const {
  const uint64_t memo_base = memo_.size();
  id.resolved.assign(s.pending.size(), 0);
  id.pending_local.assign(s.pending.size(), UINT32_MAX);
  for (size_t i = 0; i < s.pending.size(); ++i) {
    const Pending& p = s.pending[i];
    if (p.idx >= memo_base) {
      uint64_t j = p.idx - memo_base;
      if (j >= p.slots || slot_want(s.memo[j]) != p.want) return false;
      id.pending_local[i] = slot_local(s.memo[j]);
      continue;
    }
    Val v = memo_at(p.idx);
    if (v.is_node()) {
      if (!nodes_[v.idx()].is_converted) return false;
      v = nodes_[v.idx()].converted;
    }
    if (v.tag() != want_tag(p.want) || v.payload() > kRefPayload) return false;
    id.resolved[i] = v.idx();
  }
  // A bad string is reported where it is, by this thread's decode.
  for (std::string_view sv : s.strings)
    if (!is_pickle_text(sv)) return false;

  return true;
}

// What is new in the share, interned into the model in file order.
void Unpickler::par_intern(const Share& s, ShareIds& id) {
  id.str.resize(s.strings.size());
  for (size_t i = 0; i < s.strings.size(); ++i) id.str[i] = strings_.intern(s.strings[i]);
  id.frame.resize(s.frames.size());
  for (size_t i = 0; i < s.frames.size(); ++i) {
    Frame f;
    f.name = id.tr(s.frames[i].name, id.str);
    f.filename = id.tr(s.frames[i].filename, id.str);
    f.line = s.frames[i].line;
    id.frame[i] = frames_->intern_frame(f);
  }
  id.stack.assign(s.stacks.stack_count(), 0);
  std::vector<FrameId> buf;
  for (StackId k = 1; k < s.stacks.stack_count(); ++k) {
    buf.clear();
    for (FrameId f : s.stacks.stack(k)) buf.push_back(id.tr(f, id.frame));
    id.stack[k] = frames_->intern_stack(buf);
  }
  id.shape.resize(s.shapes.size());
  for (size_t i = 0; i < s.shapes.size(); ++i) {
    RowFields f;
    f.n = s.shapes[i].n;
    for (int j = 0; j < f.n; ++j) {
      f.keys[j] = id.tr(s.shapes[i].keys[j], id.str);
      f.field[j] = s.shapes[i].field[j];
    }
    id.shape[i] = hook_->row_shape(f);
  }
}

// The share's memo slots and rows with their final ids, on the helpers'
// threads too (they are done): most of the time of taking a share goes into
// filling these columns' fresh pages.
void Unpickler::par_fill(const Share& s, const ShareIds& id, uint64_t memo_base,
                         uint64_t row_base) {
  const TraceTable& r = s.rows;
  const size_t nrows = r.rows();
  TraceTable& table = *hook_->trace_table();
  memo_.resize(memo_base + s.memo.size());
  table.resize(row_base + nrows);
  auto copy = [&](size_t part, size_t parts) {
    for (size_t j = s.memo.size() * part / parts, to = s.memo.size() * (part + 1) / parts; j < to;
         ++j) {
      const uint32_t c = s.memo[j], local = slot_local(c);
      const Want w = slot_want(c);
      uint32_t id_now = w == kWantStr     ? id.str[local]
                        : w == kWantStack ? id.stack[local]
                        : w == kWantFrame ? id.frame[local]
                                          : static_cast<uint32_t>(row_base + local);
      // A list's slot is set by par_replay.
      memo_[memo_base + j] = w == kWantList ? 0 : static_cast<uint32_t>(want_tag(w)) << 28 | id_now;
    }
    for (size_t i = nrows * part / parts, to = nrows * (part + 1) / parts; i < to; ++i) {
      size_t row = row_base + i;
#define MEMSIGHT_TRACE_TAKE(Name, key, column, Kind) \
  table.column[row] = id.cell<TraceKind::Kind>(r.column[i]);
      MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_TAKE)
#undef MEMSIGHT_TRACE_TAKE
      table.shape[row] = id.shape[r.shape[i]];
    }
  };
  size_t parts = std::clamp<size_t>(nrows >> 16, 1, std::min<size_t>(par_->threads, 8));
  parallel_for(parts, parts, [&](size_t k) { copy(k, parts); });
  for (auto [row, a] : s.action_refs)
    hook_->set_row_action(static_cast<uint32_t>(row_base + row), id.tr(a, id.str));
}

// The share's list operations, on this thread's stack: the rows into their
// device's list, and the lists.
void Unpickler::par_replay(const Share& s, uint64_t memo_base, uint64_t row_base) {
  auto row = static_cast<uint32_t>(row_base);
  size_t next_list = 0;
  for (uint8_t op : s.ops) {
    switch (op) {
      case EMPTY_DICT:
        stack_.push_back(Val::make(Val::Row, row++));
        break;
      case EMPTY_LIST:
        new_node(Val::List);
        break;
      case MARK:
        marks_.push_back(stack_.size());
        break;
      case MEMOIZE: {
        uint64_t idx = memo_base + s.list_slots[next_list++];
        Val v = stack_.back();
        memo_set(idx, v);
        if (v.is_node()) nodes_[v.idx()].memo = static_cast<uint32_t>(idx);
        break;
      }
      case APPENDS: {
        size_t from = marks_.back();
        marks_.pop_back();
        append_items(nodes_[stack_[from - 1].idx()], stack_.data() + from, stack_.size() - from);
        stack_.resize(from);
        break;
      }
      case APPEND:
        append_items(nodes_[stack_[stack_.size() - 2].idx()], &stack_.back(), 1);
        stack_.pop_back();
        break;
    }
  }
}

}  // namespace memsight
