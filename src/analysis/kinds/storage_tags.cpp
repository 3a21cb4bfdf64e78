// The storages memsight.torch tagged at dump time (the snapshot's top-level
// "memsight_tags"), read and laid over the blocks they live in.
#include "analysis/kinds/storage_tags.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace memsight {
namespace {

std::string_view str_of(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? std::string_view(v->s) : std::string_view();
}

// Tag priority when several storages share a block: what a person would
// call it first.
int priority(Category c) {
  switch (c) {
    case Category::Parameter:
      return 0;
    case Category::Buffer:
      return 1;
    case Category::Gradient:
      return 2;
    default:
      return 3;
  }
}

Category parse_category(std::string_view s) {
  if (s == "parameter") return Category::Parameter;
  if (s == "gradient") return Category::Gradient;
  if (s == "optimizer_state" || s == "optimizer state") return Category::OptimizerState;
  if (s == "buffer") return Category::Buffer;
  return Category::Unknown;
}

}  // namespace

std::vector<StorageTag> read_tags(const Snapshot& snap) {
  std::vector<StorageTag> out;
  const PyValue* t = snap.top("memsight_tags");
  const PyValue* st = t ? t->get("storages") : nullptr;
  if (!st || st->kind != PyValue::Kind::List) return out;
  for (const PyValue& e : st->items) {
    if (e.kind != PyValue::Kind::Dict) continue;
    StorageTag tag;
    const PyValue *dev = e.get("device"), *addr = e.get("addr"), *size = e.get("size");
    if (!dev || !addr || !size || dev->kind != PyValue::Kind::Int ||
        addr->kind != PyValue::Kind::Int || size->kind != PyValue::Kind::Int)
      continue;
    tag.device = dev->i;
    tag.address = addr->i;
    tag.size = size->i;
    tag.category = parse_category(str_of(e.get("category")));
    if (tag.category == Category::Unknown) continue;
    tag.name = str_of(e.get("name"));
    tag.module = str_of(e.get("module"));
    out.push_back(std::move(tag));
  }
  return out;
}

void apply_tags(const std::vector<StorageTag>& tags, int64_t device, const replay::Result& rr,
                BlockCategories& bc) {
  if (std::none_of(tags.begin(), tags.end(),
                   [&](const StorageTag& t) { return t.device == device; }))
    return;
  std::unordered_map<std::string, uint32_t> module_ids;
  for (uint32_t m = 0; m < bc.modules.size(); ++m) module_ids.emplace(bc.modules[m], m + 1);
  std::vector<std::pair<int64_t, uint32_t>> live;  // (address, block)
  for (uint32_t i = 0; i < rr.blocks.size(); ++i)
    if (rr.blocks[i].free_requested == replay::Lifetime::kNever)
      live.emplace_back(rr.blocks[i].address, i);
  std::sort(live.begin(), live.end());
  std::vector<int> best(rr.blocks.size(), 99);
  for (const StorageTag& tag : tags) {
    if (tag.device != device) continue;
    ++bc.sources.tags;
    auto it = std::upper_bound(live.begin(), live.end(), std::make_pair(tag.address, UINT32_MAX));
    if (it == live.begin()) continue;
    const replay::Lifetime& l = rr.blocks[std::prev(it)->second];
    // tag.address >= l.address; unsigned: a file's addresses can be anything
    if (static_cast<uint64_t>(tag.address) - static_cast<uint64_t>(l.address) >=
        static_cast<uint64_t>(l.size))
      continue;
    ++bc.sources.tags_matched;
    uint32_t b = std::prev(it)->second;
    if (priority(tag.category) >= best[b]) continue;
    best[b] = priority(tag.category);
    BlockClass& c = bc.blocks[b];
    c.category = tag.category;
    c.tagged = true;
    auto [m, fresh] = module_ids.emplace(tag.module, static_cast<uint32_t>(bc.modules.size() + 1));
    if (fresh) bc.modules.push_back(tag.module);
    c.module = m->second;
  }
}

}  // namespace memsight
