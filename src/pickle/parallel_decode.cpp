// Decoding a big trace on several threads, in two passes.
//
// A full read of a framed (protocol 4+) snapshot spends most of its time on
// the trace entries. Once the main thread is inside a big trace list,
// helper threads walk the rest of it exactly as a segments-only read does
// (skip.cpp): each starts at a frame boundary, finds the first entry after
// it, and counts its share's memo slots and entries while checking every
// opcode. The main thread decodes the start of the trace itself. When it
// stands exactly on the first helper's start, it knows every share's first
// memo slot and first row; it checks the helpers' walks, replays their list
// operations on its stack and sizes the model's columns and the memo for
// every row and slot.
//
// Then the shares are decoded on all threads, in place (row_chunks.cpp):
// rows into their columns, memo slots into the memo. Strings, frames and
// stacks new in a share get local ids, and a memo read of a slot in an
// earlier share is left pending. Then, share by share in file order, the
// main thread resolves the pending reads and interns the share's new
// strings, frames, stacks and row layouts (so every id comes out as a
// one-thread read makes it). Last, all threads rewrite the shares' memo
// slots and rows with the final ids.
//
// Anything unexpected before the columns are sized (a helper that failed, a
// start the main thread passed by) leaves the main thread decoding alone.
// After that, a share that cannot be decoded in place, or a pending read
// that is not what the entry needs, throws RestartRead, and the input is
// read again on one thread. Either way the result, or the error, is the
// one-thread read's.
#include <algorithm>
#include <system_error>
#include <thread>

#include "pickle/opcodes.h"
#include "pickle/row_chunks.h"
#include "pickle/trace_walk.h"
#include "pickle/unpickler.h"

namespace memsight {
using namespace pickle_op;
using namespace row_chunks;

struct Unpickler::Parallel {
  const uint8_t* launch_at = nullptr;
  bool launched = false;
  size_t threads_allowed = 1;
  trace_walk::Walkers walkers;
};

void Unpickler::ParallelDeleter::operator()(Parallel* p) const { delete p; }

// A share's local ids, translated: strings, frames, stacks, layouts, and
// its pending reads (global ids of the wanted kind).
struct Unpickler::Ids {
  std::vector<uint32_t> resolved, str, frame, stack;
  std::vector<ShapeId> shape;
  uint32_t tr(uint32_t r, const std::vector<uint32_t>& local) const {
    switch (ref_kind(r)) {
      case kGlobal:
        return ref_payload(r);
      case kLocal:
        return local[ref_payload(r)];
      default:
        return resolved[ref_payload(r)];
    }
  }
  // The final memo code of a provisional one (ids are below 2^28).
  uint32_t final_code(uint32_t m) const {
    uint32_t local = m & ((1u << kLocalIdBits) - 1);
    switch (static_cast<Want>(m >> kLocalIdBits & 3)) {
      case kWantStr:
        return uint32_t{Val::Str} << 28 | str[local];
      case kWantStack:
        return uint32_t{Val::StackRef} << 28 | stack[local];
      default:
        return uint32_t{Val::FrameRef} << 28 | frame[local];
    }
  }
};

// The value of memo slot idx, final or still provisional in an earlier
// share (whose ids are known by now).
Val Unpickler::slot_value(const std::vector<row_chunks::Share>& shares, const std::vector<Ids>& ids,
                          uint64_t idx) const {
  uint32_t m = memo_[idx];
  if (m >> 28 == kProvisionalTag) {
    auto it =
        std::upper_bound(shares.begin(), shares.end(), idx,
                         [](uint64_t i, const row_chunks::Share& s) { return i < s.memo_base; });
    m = ids[static_cast<size_t>(it - shares.begin()) - 1].final_code(m);
    return Val::make(static_cast<Val::Tag>(m >> 28), m & ((1u << 28) - 1));
  }
  Val v = memo_at(idx);
  if (v.is_node()) {
    if (!nodes_[v.idx()].is_converted) throw RestartRead{};
    v = nodes_[v.idx()].converted;
  }
  return v;
}

namespace {
const uint8_t* const kNever = reinterpret_cast<const uint8_t*>(~uintptr_t{0});

// Runs work(k) for k in [0, n) on the calling thread and up to threads - 1
// helpers, each taking the next k left; returns when all are done. Fewer
// helpers when threads cannot be had. `work` must not throw.
template <class Work>
void for_each_share(size_t n, size_t threads, const Work& work) {
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t k; (k = next.fetch_add(1)) < n;) work(k);
  };
  std::vector<std::thread> helpers;
  try {
    for (size_t t = 1; t < std::min(threads, n); ++t) helpers.emplace_back(run);
  } catch (const std::system_error&) {
  }
  run();
  for (auto& t : helpers) t.join();
}
}  // namespace

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
  size_t share = std::max<size_t>(decode_stats::share_bytes.load(), 4096);
  P.threads_allowed = std::min<size_t>(skip_stats::reader_threads(), 32);
  // Twice as many shares as threads: the main thread's own share (decoded
  // while the helpers walk) is small, and shares balance over the threads.
  size_t n = std::min<size_t>({2 * P.threads_allowed, static_cast<size_t>(end_ - p_) / share, 32});
  // Three threads at least: with two, the helper's walk costs what the
  // second thread saves (on a 2-core VM, summary of the 856k-entry file
  // took 0.156 s decoded in shares, 0.119 s on one thread).
  return P.threads_allowed >= 3 && n >= 2 &&
         P.walkers.start(src_, base_, p_, end_, slot, n, share / 4);
}

void Unpickler::par_abandon() {
  par_->walkers.stop();
  par_check_ = kNever;
}

void Unpickler::par_step() {
  Parallel& P = *par_;
  if (!P.launched) {
    if (!par_launch()) {
      par_check_ = kNever;
      return;
    }
    par_check_ = P.walkers.chunks()[0].from;
    return;
  }
  trace_walk::Chunk& first = P.walkers.chunks()[0];
  int s;
  while ((s = first.state.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
  const uint8_t* start = first.start.load(std::memory_order_acquire);
  if (s < 0 || p_ > start) return par_abandon();
  if (p_ < start) {
    par_check_ = start;
    return;
  }
  if (!par_take_over()) return par_abandon();
  P.walkers.stop();
  par_check_ = kNever;
}

// Whether the walks' list operations, replayed on the stack as it is, would
// act on lists where the VM's would.
bool Unpickler::walks_fit_stack(const std::vector<trace_walk::Chunk>& walks) const {
  std::vector<uint8_t> lists(stack_.size());
  for (size_t i = 0; i < stack_.size(); ++i)
    lists[i] = stack_[i].tag() == Val::List && !nodes_[stack_[i].idx()].is_converted;
  std::vector<size_t> marks = marks_;
  for (auto& c : walks) {
    for (uint8_t op : c.ops) {
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
        case MEMOIZE:
          if (lists.empty()) return false;
          break;
        case APPENDS: {
          if (marks.empty()) return false;
          size_t from = marks.back();
          marks.pop_back();
          if (from == 0 || from > lists.size() || !lists[from - 1]) return false;
          lists.resize(from);
          break;
        }
        case APPEND:
          if (lists.size() < 2 || !lists[lists.size() - 2]) return false;
          lists.pop_back();
          break;
        default:
          return false;
      }
    }
  }
  return true;
}

// Replays the walks' list operations on the stack: the shares' rows (filled
// later) and the devices' lists, with their memo slots.
void Unpickler::replay_walks(const std::vector<trace_walk::Chunk>& walks,
                             const std::vector<Share>& shares) {
  for (size_t k = 0; k < shares.size(); ++k) {
    uint32_t row = shares[k].row_base;
    size_t next_memo = 0;
    for (uint8_t op : walks[k].ops) {
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
          uint64_t idx = shares[k].memo_base + walks[k].memo_ops[next_memo++];
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
}

// At the first helper's start, with the helpers' walks done.
bool Unpickler::par_take_over() {
  Parallel& P = *par_;
  P.walkers.join();
  std::vector<trace_walk::Chunk>& walks = P.walkers.chunks();
  TraceTable& table = *hook_->trace_table();
  // The shares: where their memo slots and rows go. A walk may read only
  // slots stored before it reads them.
  std::vector<Share> shares(walks.size());
  uint64_t memo_base = memo_.size();
  uint64_t row_base = table.rows();
  for (size_t k = 0; k < walks.size(); ++k) {
    trace_walk::Chunk& c = walks[k];
    if (c.state.load() != 2 || c.reach >= static_cast<int64_t>(memo_base)) return false;
    Share& sh = shares[k];
    sh.start = c.start.load();
    sh.stop = c.stop;
    sh.memo_base = memo_base;
    sh.row_base = static_cast<uint32_t>(row_base);
    sh.memos = c.memos;
    sh.rows = c.entries();
    sh.list_slots = c.memo_ops;
    memo_base += c.memos;
    row_base += sh.rows;
  }
  if (row_base >= (uint64_t{1} << 28) || memo_base >= (uint64_t{1} << 32)) return false;
  if (!walks_fit_stack(walks)) return false;

  // From here on the model is being filled: a failure restarts the read.
  ++decode_stats::parallel_decodes;
  Context ctx;
  ctx.src = &src_;
  ctx.base = base_;
  ctx.end = end_;
  ctx.known = shares[0].memo_base;
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
  ctx.trace = &table;
  table.resize(row_base);
  memo_.resize(memo_base);  // every slot is written: by a share, or by the replay below
  ctx.memo = memo_.data();

  replay_walks(walks, shares);
  const uint8_t* stop = walks.back().stop;
  walks.clear();

  // Decode every share in place, on the main thread and helpers.
  for_each_share(shares.size(), P.threads_allowed, [&](size_t k) {
    try {
      decode_share(shares[k], ctx);
    } catch (...) {  // out of memory in a helper: its share is not ok
      shares[k].ok = false;
    }
  });
  for (const Share& sh : shares)
    if (!sh.ok) throw RestartRead{};

  // Share by share, in file order: resolve the pending reads and intern
  // what is new, so ids come out in one-thread order.
  std::vector<Ids> ids(shares.size());
  std::vector<FrameId> buf;
  for (size_t k = 0; k < shares.size(); ++k) {
    Share& sh = shares[k];
    Ids& id = ids[k];
    id.resolved.resize(sh.pending.size());
    for (size_t i = 0; i < sh.pending.size(); ++i) {
      const Pending& p = sh.pending[i];
      Val v = slot_value(shares, ids, p.idx);
      Val::Tag expect = p.want == kWantStr     ? Val::Str
                        : p.want == kWantStack ? Val::StackRef
                                               : Val::FrameRef;
      if (v.tag() != expect || v.idx() > kRefPayload) throw RestartRead{};
      id.resolved[i] = v.idx();
    }
    id.str.resize(sh.strings.size());
    try {
      for (size_t i = 0; i < sh.strings.size(); ++i) id.str[i] = strings_.intern(sh.strings[i]);
    } catch (const Error&) {
      throw RestartRead{};  // a bad string: the read on one thread reports it where it is
    }
    id.frame.resize(sh.frames.size());
    for (size_t i = 0; i < sh.frames.size(); ++i) {
      Frame f;
      f.name = id.tr(sh.frames[i].name, id.str);
      f.filename = id.tr(sh.frames[i].filename, id.str);
      f.line = sh.frames[i].line;
      id.frame[i] = frames_->intern_frame(f);
    }
    id.stack.assign(sh.stacks.stack_count(), 0);
    for (StackId s = 1; s < sh.stacks.stack_count(); ++s) {
      buf.clear();
      for (FrameId r : sh.stacks.stack(s)) buf.push_back(id.tr(r, id.frame));
      id.stack[s] = frames_->intern_stack(buf);
    }
    id.shape.resize(sh.shapes.size());
    for (size_t i = 0; i < sh.shapes.size(); ++i) {
      RowFields r;
      r.n = sh.shapes[i].n;
      for (int j = 0; j < r.n; ++j) {
        r.keys[j] = id.tr(sh.shapes[i].keys[j], id.str);
        r.field[j] = sh.shapes[i].field[j];
      }
      id.shape[i] = hook_->row_shape(r);
    }
    for (auto [row, r] : sh.action_refs) hook_->set_row_action(row, id.tr(r, id.str));
  }
  // Rewrite the shares' memo slots and rows with final ids, on all threads.
  if (strings_.size() >= (1u << 28) || frames_->frame_count() >= (1u << 28) ||
      frames_->stack_count() >= (1u << 28))
    throw RestartRead{};  // ids too wide for a memo slot: rare, left to one thread
  for_each_share(shares.size(), P.threads_allowed, [&](size_t k) {
    const Share& sh = shares[k];
    const Ids& id = ids[k];
    for (uint64_t i = sh.memo_base; i < sh.memo_base + sh.memos; ++i)
      if (memo_[i] >> 28 == kProvisionalTag) memo_[i] = id.final_code(memo_[i]);
    for (uint64_t r = sh.row_base; r < sh.row_base + sh.rows; ++r) {
      table.compile_context[r] = id.tr(table.compile_context[r], id.str);
      table.user_metadata[r] = id.tr(table.user_metadata[r], id.str);
      table.stack[r] = id.tr(table.stack[r], id.stack);
      table.shape[r] = id.shape[table.shape[r]];
    }
  });
  p_ = stop;
  return true;
}

}  // namespace memsight
