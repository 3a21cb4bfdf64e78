#include "analysis/moments/process_marks.h"

#include <algorithm>
#include <charconv>

#include "model/device_dicts.h"

namespace memsight {
namespace {

std::string_view str_or_empty(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? std::string_view(v->s) : std::string_view();
}
int64_t int_or(const PyValue* v, int64_t otherwise) {
  return v && v->kind == PyValue::Kind::Int ? v->i : otherwise;
}

// The number after a prefix ("ProfilerStep#12" -> 12); -1 when none.
int64_t number_after(std::string_view name, std::string_view prefix) {
  std::string_view n = name.substr(prefix.size());
  int64_t v = -1;
  auto r = std::from_chars(n.data(), n.data() + n.size(), v);
  return r.ec == std::errc() && r.ptr == n.data() + n.size() && v >= 0 ? v : -1;
}

// Appends the START annotations among `list` named with `prefix`, each with
// the time of the END that closes it (innermost first, as record_function
// nests), to `out`.
template <class List>
void append_marks(const List& list, std::string_view prefix, std::vector<StepMark>& out) {
  std::vector<size_t> open;
  for (const PyValue* a : list) {
    std::string_view name = str_or_empty(a->get("name")), stage = str_or_empty(a->get("stage"));
    if (!name.starts_with(prefix)) continue;
    int64_t time = int_or(a->get("time_us"), 0);
    if (stage == "START") {
      open.push_back(out.size());
      out.push_back({time, number_after(name, prefix), time});
    } else if (stage == "END" && !open.empty()) {
      out[open.back()].end = std::max(out[open.back()].end, time);
      open.pop_back();
    }
  }
}

void sort_by_time(std::vector<StepMark>& marks) {
  std::stable_sort(marks.begin(), marks.end(),
                   [](const StepMark& a, const StepMark& b) { return a.time < b.time; });
}

}  // namespace

std::vector<StepMark> device_marks(const Snapshot& snap, int64_t device, std::string_view prefix) {
  std::vector<StepMark> out;
  append_marks(snap.annotations().of(device), prefix, out);
  sort_by_time(out);
  return out;
}

const std::vector<StepMark>& ProcessMarks::of(size_t source, std::string_view prefix) {
  std::optional<std::vector<StepMark>>& cached = marks_[source];
  if (cached) return *cached;
  std::vector<StepMark> all;
  // Device by device (START and END pair within a device), as the index
  // groups them: an annotation without an integer device belongs to none.
  const PyValue* list = snap_.top("external_annotations");
  std::vector<int64_t> devices;
  if (list && list->kind == PyValue::Kind::List)
    for (const PyValue& a : list->items)
      if (const PyValue* d = a.kind == PyValue::Kind::Dict ? a.get("device") : nullptr;
          d && d->kind == PyValue::Kind::Int && str_or_empty(a.get("name")).starts_with(prefix))
        devices.push_back(d->i);
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  for (int64_t d : devices) append_marks(snap_.annotations().of(d), prefix, all);
  sort_by_time(all);
  // Marks at one time begin one iteration: the first stands for them (a
  // million references to one annotation cost one mark), with their latest
  // end; then each end raised to the latest up to it.
  size_t kept = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (kept > 0 && all[kept - 1].time == all[i].time) {
      all[kept - 1].end = std::max(all[kept - 1].end, all[i].end);
      continue;
    }
    all[kept] = all[i];
    if (kept > 0) all[kept].end = std::max(all[kept].end, all[kept - 1].end);
    ++kept;
  }
  all.resize(kept);
  all.shrink_to_fit();
  cached = std::move(all);
  return *cached;
}

}  // namespace memsight
