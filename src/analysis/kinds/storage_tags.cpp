// The storages memsight.torch tagged at dump time (the snapshot's top-level
// "memsight_tags"), read and laid over the blocks they live in.
#include "analysis/kinds/storage_tags.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "model/device_dicts.h"

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

// One entry of memsight_tags' storages; false when not well formed.
bool read_tag(const PyValue& e, StorageTag& tag) {
  if (e.kind != PyValue::Kind::Dict) return false;
  const PyValue *dev = e.get("device"), *addr = e.get("addr"), *size = e.get("size");
  if (!dev || !addr || !size || dev->kind != PyValue::Kind::Int ||
      addr->kind != PyValue::Kind::Int || size->kind != PyValue::Kind::Int)
    return false;
  tag.device = dev->i;
  tag.address = addr->i;
  tag.size = size->i;
  tag.category = parse_category(str_of(e.get("category")));
  if (tag.category == Category::Unknown) return false;
  tag.name = str_of(e.get("name"));
  tag.module = str_of(e.get("module"));
  return true;
}

bool by_device(const StorageTag& a, const StorageTag& b) { return a.device < b.device; }

}  // namespace

std::vector<StorageTag> read_tags(const Snapshot& snap) {
  std::vector<StorageTag> out;
  const PyValue* t = snap.top("memsight_tags");
  const PyValue* st = t ? t->get("storages") : nullptr;
  if (!st || st->kind != PyValue::Kind::List) return out;
  for (const PyValue& e : st->items)
    if (StorageTag tag; read_tag(e, tag)) out.push_back(std::move(tag));
  std::stable_sort(out.begin(), out.end(), by_device);
  return out;
}

std::vector<StorageTag> read_tags(const Snapshot& snap, int64_t device) {
  std::vector<StorageTag> out;
  for (const PyValue* e : snap.storage_tags().of(device))
    if (StorageTag tag; read_tag(*e, tag)) out.push_back(std::move(tag));
  return out;
}

void apply_tags(const std::vector<StorageTag>& tags, int64_t device, const replay::Result& rr,
                BlockCategories& bc) {
  StorageTag key;
  key.device = device;
  const auto [first, last] = std::equal_range(tags.begin(), tags.end(), key, by_device);
  if (first == last) return;
  std::unordered_map<std::string, uint32_t> module_ids;
  for (uint32_t m = 0; m < bc.modules.size(); ++m) module_ids.emplace(bc.modules[m], m + 1);
  std::vector<std::pair<int64_t, uint32_t>> live;  // (address, block)
  for (uint32_t i = 0; i < rr.blocks.size(); ++i)
    if (rr.blocks[i].free_requested == replay::Lifetime::kNever)
      live.emplace_back(rr.blocks[i].address, i);
  std::sort(live.begin(), live.end());
  std::vector<int> best(rr.blocks.size(), 99);
  for (auto t = first; t != last; ++t) {
    const StorageTag& tag = *t;
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
