// The VM's lists and dicts: items appended (a list of consecutive rows kept
// as a range), dict items set as Python would (or the dict handed to the
// hook), and a container replaced by its compact value.
#include "memsight/error.h"
#include "pickle/unpickler.h"

namespace memsight {

std::vector<Val> Unpickler::list_items(Val v) const {
  const Node& n = nodes_[v.idx()];
  std::vector<Val> out;
  out.reserve(n.row_count + n.items.size());
  for (uint32_t r = 0; r < n.row_count; ++r) out.push_back(Val::make(Val::Row, n.row_first + r));
  out.insert(out.end(), n.items.begin(), n.items.end());
  return out;
}

void Unpickler::convert_node(Val container, Val compact) {
  Node& n = nodes_[container.idx()];
  if (n.memo != UINT32_MAX && n.memo < memo_.size()) {
    if (memo_at(n.memo) == container) memo_set(n.memo, compact);
  } else if (n.memo != UINT32_MAX) {  // a slot past the dense ones (BINPUT 42 first)
    auto it = sparse_memo_.find(n.memo);
    if (it != sparse_memo_.end() && it->second == container) it->second = compact;
  }
  if (n.gets == 0) {
    // Nothing but the caller refers to it: recycle the node.
    n.items.clear();
    n.is_converted = false;
    n.memo = UINT32_MAX;
    free_nodes_.push_back(container.idx());
  } else {
    n.is_converted = true;
    n.converted = compact;
    n.items.clear();
    n.items.shrink_to_fit();
  }
}

// A change to a container a memo read has handed out: with a hook, what it
// converted may hold the container as it was (see NeedsExactRead).
void Unpickler::shared_change() {
  if (hook_) throw NeedsExactRead{};
  ++shared_changes_;
}

// APPEND or SETITEM on `target`, which is not a list or a dict. With a hook
// it may be one that was converted (a frames list into a stack, a dict into
// a row or a frame) and then reached again: a read without conversions tells.
void Unpickler::changed_after_use(Val target, const char* what) const {
  Val::Tag t = target.tag();
  bool converted = target.is_node() ? nodes_[target.idx()].is_converted
                                    : t == Val::Row || t == Val::FrameRef || t == Val::StackRef;
  if (hook_ && converted) throw NeedsExactRead{};
  fail(what);
}

void Unpickler::append_items(Node& list, const Val* v, size_t n) {
  if (list.gets) shared_change();
  size_t i = 0;
  if (list.items.empty()) {
    // Extend the row range while the items are the next rows.
    for (; i < n && v[i].tag() == Val::Row; ++i) {
      if (list.row_count == 0) {
        list.row_first = v[i].idx();
      } else if (v[i].idx() != list.row_first + list.row_count) {
        break;
      }
      ++list.row_count;
    }
    if (i < n && list.row_count) {
      for (uint32_t r = 0; r < list.row_count; ++r)
        list.items.push_back(Val::make(Val::Row, list.row_first + r));
      list.row_count = 0;
    }
  }
  list.items.insert(list.items.end(), v + i, v + n);
}

void Unpickler::add_pairs(Node& d, const Val* kv, size_t n) {
  // Later keys replace earlier equal ones, as in a Python dict. Only scalar
  // keys can be compared cheaply; small dicts are checked, big ones trusted.
  if (d.gets) shared_change();
  for (size_t i = 0; i + 1 < n; i += 2) {
    bool replaced = false;
    if (d.items.size() <= 64) {
      for (size_t j = 0; j < d.items.size(); j += 2) {
        if (d.items[j] == kv[i] && !kv[i].is_node()) {
          d.items[j + 1] = kv[i + 1];
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) {
      d.items.push_back(kv[i]);
      d.items.push_back(kv[i + 1]);
    }
  }
}

// Whether Python could use the value as a dict key: not a list or a dict
// (converted ones included), nor a tuple holding one.
bool Unpickler::hashable(Val v, int depth) const {
  switch (resolve(v).tag()) {
    case Val::List:
    case Val::Dict:
    case Val::Row:
    case Val::FrameRef:
    case Val::StackRef:
      return false;
    case Val::Tuple:
      if (depth >= 64) return true;  // deeper tuples are left unchecked
      for (Val x : nodes_[v.idx()].items)
        if (!hashable(x, depth + 1)) return false;
      return true;
    default:
      return true;
  }
}

void Unpickler::set_items(size_t from) {
  // stack_[from-1] is the dict, stack_[from..] are key/value pairs.
  if (from <= fence()) underflow("SETITEMS");
  size_t n = stack_.size() - from;
  if (n == 0) return;  // pickle.loads does nothing then, whatever the target is
  if (n % 2) fail("odd number of items for a dict");
  // pickle.load refuses such a dict (TypeError: unhashable type): so does
  // this reader, or it would read files that torch cannot.
  for (size_t i = from; i < stack_.size(); i += 2)
    if (!hashable(stack_[i], 0)) fail("a dict key is a list or a dict, which Python refuses");
  Val target = stack_[from - 1];
  if (target.tag() != Val::Dict)
    changed_after_use(target, "SETITEM on something that is not a dict");
  Node* d = &nodes_[target.idx()];
  if (d->is_converted) changed_after_use(target, "SETITEM on something that is not a dict");
  if (d->items.empty() && hook_ && d->gets == 0 && n > 0) {
    Val out;
    if (hook_->convert_dict(*this, {stack_.data() + from, n}, out)) {
      convert_node(target, out);
      stack_[from - 1] = out;
      stack_.resize(from);
      return;
    }
    d = &nodes_[target.idx()];  // the hook may have grown the pool
  }
  add_pairs(*d, stack_.data() + from, n);
  stack_.resize(from);
}

}  // namespace memsight
