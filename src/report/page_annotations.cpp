#include "report/page_annotations.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace memsight::report {
namespace {

struct Mark {
  int64_t time;
  bool start;
  std::string name;
};

int64_t as_int(const PyValue* v) { return v && v->kind == PyValue::Kind::Int ? v->i : -1; }
std::string as_str(const PyValue* v) {
  return v && v->kind == PyValue::Kind::Str ? v->s.str() : "";
}

}  // namespace

AnnotationRanges annotation_ranges(const Snapshot& snap, size_t device) {
  std::vector<Mark> marks;
  if (const PyValue* list = snap.top("external_annotations");
      list && list->kind == PyValue::Kind::List) {
    for (const PyValue& a : list->items) {
      if (a.kind != PyValue::Kind::Dict) continue;
      std::string stage = as_str(a.get("stage"));
      if ((stage != "START" && stage != "END") || as_int(a.get("device")) != int64_t(device))
        continue;
      marks.push_back({as_int(a.get("time_us")), stage == "START", as_str(a.get("name"))});
    }
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
      marks.push_back({snap.trace.time_us[r], stage == "START", std::string(snap.str(f.filename))});
    }
  }
  std::stable_sort(marks.begin(), marks.end(),
                   [](const Mark& a, const Mark& b) { return a.time < b.time; });

  AnnotationRanges out;
  std::map<std::string, std::vector<size_t>> open;  // name -> ranges without an END yet
  for (Mark& m : marks) {
    if (m.start) {
      open[m.name].push_back(out.name.size());
      out.name.push_back(std::move(m.name));
      out.start.push_back(m.time);
      out.end.push_back(-1);
    } else if (auto it = open.find(m.name); it != open.end() && !it->second.empty()) {
      out.end[it->second.back()] = m.time;
      it->second.pop_back();
    } else {
      out.name.push_back(std::move(m.name));
      out.start.push_back(-1);
      out.end.push_back(m.time);
    }
  }
  // In order of start, ranges begun before the recording first.
  std::vector<size_t> order(out.name.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return out.start[a] < out.start[b]; });
  AnnotationRanges sorted;
  for (size_t i : order) {
    sorted.name.push_back(std::move(out.name[i]));
    sorted.start.push_back(out.start[i]);
    sorted.end.push_back(out.end[i]);
  }
  return sorted;
}

}  // namespace memsight::report
