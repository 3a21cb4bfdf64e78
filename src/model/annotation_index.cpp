#include "model/annotation_index.h"

#include <algorithm>
#include <mutex>
#include <numeric>

namespace memsight {

AnnotationIndex::AnnotationIndex(const Snapshot& snap) {
  const PyValue* list = snap.top("external_annotations");
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

std::span<const PyValue* const> AnnotationIndex::of(int64_t device) const {
  auto [lo, hi] = std::equal_range(device_.begin(), device_.end(), device);
  return {item_.data() + (lo - device_.begin()), static_cast<size_t>(hi - lo)};
}

const AnnotationIndex& Snapshot::annotations() const {
  std::lock_guard<std::mutex> lock(annotations_.mutex);
  if (!annotations_.index) annotations_.index = std::make_shared<const AnnotationIndex>(*this);
  return *annotations_.index;
}

}  // namespace memsight
