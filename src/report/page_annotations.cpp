#include "report/page_annotations.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <type_traits>

#include "model/device_dicts.h"

namespace memsight::report {
namespace {

// Names are views of the snapshot's text: an annotation dict referred to
// two million times is still held once.
struct Mark {
  int64_t time;
  std::string_view name;
  uint32_t seq;  // its place in the list (the trace after): ties keep it
  bool start;
};

int64_t as_int(const PyValue* v) { return v && v->kind == PyValue::Kind::Int ? v->i : -1; }
std::string_view as_str(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? std::string_view(v->s) : std::string_view();
}

}  // namespace

AnnotationRanges annotation_ranges(const Snapshot& snap, size_t device) {
  std::vector<Mark> marks;
  const auto listed = snap.annotations().of(static_cast<int64_t>(device));
  marks.reserve(listed.size());
  for (const PyValue* a : listed) {
    std::string_view stage = as_str(a->get("stage"));
    if (stage != "START" && stage != "END") continue;
    marks.push_back({as_int(a->get("time_us")), as_str(a->get("name")),
                     static_cast<uint32_t>(marks.size()), stage == "START"});
  }
  // Recordings before torch 2.5 kept them in the trace.
  if (device < snap.device_count()) {
    auto [begin, end] = snap.device_rows(device);
    for (uint32_t r = begin; r < end; ++r) {
      if (snap.trace.action[r] != Action::Other) continue;
      auto it = snap.trace.action_name.find(r);
      if (it == snap.trace.action_name.end() || snap.str(it->second) != "user_defined") continue;
      auto frames = snap.frames.stack(snap.trace.stack[r]);
      if (frames.empty()) continue;
      const Frame& f = snap.frames.frame(frames[0]);
      std::string_view stage = snap.str(f.name);
      if (stage != "START" && stage != "END") continue;
      marks.push_back({snap.trace.time_us[r], snap.str(f.filename),
                       static_cast<uint32_t>(marks.size()), stage == "START"});
    }
  }
  // By time, in list order on ties (sorted in place: a stable sort's
  // buffer was as large again).
  std::sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) {
    return a.time != b.time ? a.time < b.time : a.seq < b.seq;
  });

  AnnotationRanges out;
  out.name.reserve(marks.size());
  out.start.reserve(marks.size());
  out.end.reserve(marks.size());
  std::map<std::string_view, std::vector<uint32_t>> open;  // name -> ranges without an END yet
  for (const Mark& m : marks) {
    if (m.start) {
      open[m.name].push_back(static_cast<uint32_t>(out.name.size()));
      out.name.push_back(m.name);
      out.start.push_back(m.time);
      out.end.push_back(-1);
    } else if (auto it = open.find(m.name); it != open.end() && !it->second.empty()) {
      out.end[it->second.back()] = m.time;
      it->second.pop_back();
    } else {
      out.name.push_back(m.name);
      out.start.push_back(-1);
      out.end.push_back(m.time);
    }
  }
  std::vector<Mark>().swap(marks);
  decltype(open)().swap(open);
  // In order of start, ranges begun before the recording first; one column
  // at a time.
  std::vector<uint32_t> order(out.name.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return out.start[a] != out.start[b] ? out.start[a] < out.start[b] : a < b;
  });
  auto in_order = [&](auto& column) {
    std::remove_reference_t<decltype(column)> sorted;
    sorted.reserve(order.size());
    for (uint32_t i : order) sorted.push_back(column[i]);
    column.swap(sorted);
  };
  in_order(out.name);
  in_order(out.start);
  in_order(out.end);
  return out;
}

}  // namespace memsight::report
