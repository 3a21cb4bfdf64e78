// The snapshot's "memsight_holders" (python/memsight/torch/capture/holders.py
// writes it; docs/formats.md) into values. Kept verbatim in the model's
// top-level keys as well, so it round-trips whatever is read here.
#include "memsight/holders.h"

#include <algorithm>
#include <tuple>

namespace memsight {
namespace {

std::string str_of(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? std::string(std::string_view(v->s)) : std::string();
}

bool int_of(const PyValue* v, int64_t& out) {
  if (!v || v->kind != PyValue::Kind::Int) return false;
  out = v->i;
  return true;
}

std::vector<Holder> read_holder_list(const PyValue* list) {
  std::vector<Holder> out;
  if (!list || list->kind != PyValue::Kind::List) return out;
  for (const PyValue& e : list->items) {
    Holder h;
    if (e.kind == PyValue::Kind::Dict) {
      h.path = str_of(e.get("path"));
      h.type = str_of(e.get("type"));
      h.module = str_of(e.get("module"));
      h.file = str_of(e.get("file"));
      int_of(e.get("line"), h.line);
    }
    out.push_back(std::move(h));  // kept even when malformed: storages index this list
  }
  return out;
}

}  // namespace

Holders read_holders(const Snapshot& snap) {
  Holders out;
  const PyValue* top = snap.top("memsight_holders");
  if (!top || top->kind != PyValue::Kind::Dict) return out;
  out.holders = read_holder_list(top->get("holders"));
  const PyValue* complete = top->get("complete");
  if (complete && complete->kind == PyValue::Kind::Bool) out.complete = complete->b;
  const PyValue* st = top->get("storages");
  if (!st || st->kind != PyValue::Kind::List) return out;
  for (const PyValue& e : st->items) {
    if (e.kind != PyValue::Kind::Dict) continue;
    HeldStorage s;
    int64_t holder = -1;
    if (!int_of(e.get("device"), s.device) || !int_of(e.get("addr"), s.address) ||
        !int_of(e.get("holder"), holder) || holder < 0 ||
        holder >= static_cast<int64_t>(out.holders.size()) || out.holders[holder].path.empty())
      continue;
    int_of(e.get("size"), s.size);
    s.holder = static_cast<uint32_t>(holder);
    s.path = str_of(e.get("path"));
    out.storages.push_back(std::move(s));
  }
  std::sort(out.storages.begin(), out.storages.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.address) < std::tie(b.device, b.address);
  });
  return out;
}

const HeldStorage* Holders::in_block(int64_t device, int64_t address, int64_t size) const {
  auto it = std::lower_bound(storages.begin(), storages.end(), std::make_pair(device, address),
                             [](const HeldStorage& s, const std::pair<int64_t, int64_t>& k) {
                               return std::tie(s.device, s.address) < std::tie(k.first, k.second);
                             });
  if (it == storages.end() || it->device != device) return nullptr;
  // unsigned: a file's addresses can be anything
  if (static_cast<uint64_t>(it->address) - static_cast<uint64_t>(address) >=
      static_cast<uint64_t>(std::max<int64_t>(size, 1)))
    return nullptr;
  return &*it;
}

std::vector<HeldAmount> held_amounts(const Snapshot& snap, const Holders& holders, int64_t device) {
  std::vector<HeldAmount> out(holders.holders.size());
  for (size_t i = 0; i < out.size(); ++i) out[i].holder = holders.holders[i];
  for (const Segment& seg : snap.segments) {
    if (seg.device != device) continue;
    for (const Block& b : snap.segment_blocks(seg)) {
      if (b.state != BlockState::ActiveAllocated) continue;
      if (const HeldStorage* h = holders.in_block(device, b.address, b.size)) {
        ++out[h->holder].blocks;
        out[h->holder].bytes += b.size;
      }
    }
  }
  std::erase_if(out, [](const HeldAmount& a) { return a.blocks == 0; });
  std::stable_sort(out.begin(), out.end(), [](const HeldAmount& a, const HeldAmount& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.holder.path < b.holder.path;
  });
  return out;
}

}  // namespace memsight
