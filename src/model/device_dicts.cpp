#include "model/device_dicts.h"

#include <algorithm>
#include <mutex>

namespace memsight {
namespace {

const DeviceDicts& built_once(BuiltOnce<DeviceDicts>& once, const PyValue* list) {
  std::lock_guard<std::mutex> lock(once.mutex);
  if (!once.index) once.index = std::make_shared<const DeviceDicts>(list);
  return *once.index;
}

}  // namespace

DeviceDicts::DeviceDicts(const PyValue* list) {
  if (!list || list->kind != PyValue::Kind::List) return;
  std::vector<std::pair<int64_t, const PyValue*>> named;
  for (const PyValue& a : list->items) {
    const PyValue* d = a.kind == PyValue::Kind::Dict ? a.get("device") : nullptr;
    if (d && d->kind == PyValue::Kind::Int) named.emplace_back(d->i, &a);
  }
  std::stable_sort(named.begin(), named.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  device_.reserve(named.size());
  item_.reserve(named.size());
  for (const auto& [d, a] : named) {
    device_.push_back(d);
    item_.push_back(a);
  }
}

std::span<const PyValue* const> DeviceDicts::of(int64_t device) const {
  auto [lo, hi] = std::equal_range(device_.begin(), device_.end(), device);
  return {item_.data() + (lo - device_.begin()), static_cast<size_t>(hi - lo)};
}

const DeviceDicts& Snapshot::annotations() const {
  return built_once(annotations_, top("external_annotations"));
}

const DeviceDicts& Snapshot::device_memory() const {
  return built_once(device_memory_, top("memsight_device_memory"));
}

const DeviceDicts& Snapshot::storage_tags() const {
  const PyValue* tags = top("memsight_tags");
  return built_once(storage_tags_, tags ? tags->get("storages") : nullptr);
}

}  // namespace memsight
