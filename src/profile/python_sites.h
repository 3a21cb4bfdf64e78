#pragma once
// Where Python called each op of a profiler trace: the innermost
// python_function span around it on its thread, described by the frame
// rule (its site in the user's code and its stack text).
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memsight/profile.h"

namespace memsight::profile {

using Trace = ProfileTrace;

// The innermost span of `spans` (sorted by start, outer before inner at equal
// starts) on each thread that contains each query time: a sweep per thread.
template <typename Span>
std::vector<int64_t> innermost(const std::vector<Span>& spans, const std::vector<int64_t>& q_tid,
                               const std::vector<double>& q_ts) {
  std::vector<int64_t> out(q_ts.size(), -1);
  std::unordered_map<int64_t, std::vector<uint32_t>> by_tid_spans, by_tid_q;
  for (uint32_t i = 0; i < spans.size(); ++i) by_tid_spans[spans[i].tid].push_back(i);
  for (uint32_t i = 0; i < q_ts.size(); ++i) by_tid_q[q_tid[i]].push_back(i);
  for (auto& [tid, qs] : by_tid_q) {
    auto it = by_tid_spans.find(tid);
    if (it == by_tid_spans.end()) continue;
    auto& ss = it->second;
    std::sort(ss.begin(), ss.end(), [&](uint32_t a, uint32_t b) {
      return spans[a].ts != spans[b].ts ? spans[a].ts < spans[b].ts : spans[a].dur > spans[b].dur;
    });
    std::sort(qs.begin(), qs.end(), [&](uint32_t a, uint32_t b) { return q_ts[a] < q_ts[b]; });
    std::vector<uint32_t> open;
    size_t next = 0;
    for (uint32_t q : qs) {
      double t = q_ts[q];
      while (next < ss.size() && spans[ss[next]].ts <= t) {
        const Span& s = spans[ss[next]];
        while (!open.empty() && spans[open.back()].ts + spans[open.back()].dur < s.ts)
          open.pop_back();
        open.push_back(ss[next++]);
      }
      while (!open.empty() && spans[open.back()].ts + spans[open.back()].dur < t) open.pop_back();
      if (!open.empty()) out[q] = open.back();
    }
  }
  return out;
}

// Where Python called each op: the frame rule over its python_function
// ancestors ("path/file.py(LINE): name"), computed once per innermost Python
// call. A call's description is its site (interned: calls from one line of
// the user's code share it) and its stack text.
class PythonSites {
 public:
  PythonSites(const Trace& t, const UserCode& uc) : t_(t), uc_(uc) {
    for (uint32_t i = 0; i < t.pycalls.size(); ++i)
      if (t.pycalls[i].id >= 0) by_id_[t.pycalls[i].id] = i;
    sites_.push_back("");  // 0: no Python stack
    index_[""] = 0;
    calls_.push_back({0, ""});
  }
  void locate(const std::vector<uint32_t>& ops) {
    std::vector<int64_t> tid;
    std::vector<double> ts;
    for (uint32_t o : ops) {
      tid.push_back(t_.ops[o].tid);
      ts.push_back(t_.ops[o].ts);
    }
    auto inner = innermost(t_.pycalls, tid, ts);
    for (size_t i = 0; i < ops.size(); ++i) call_of_[ops[i]] = inner[i];
  }
  // The description of op o's call (0: its thread ran no Python).
  uint32_t of(uint32_t op) {
    auto c = call_of_.find(op);
    int64_t call = c == call_of_.end() ? -1 : c->second;
    if (call < 0) return 0;
    auto cached = by_call_.find(call);
    if (cached != by_call_.end()) return cached->second;
    auto [site, stack] = describe(call);
    auto [it, added] = index_.try_emplace(site, static_cast<uint32_t>(sites_.size()));
    if (added) sites_.push_back(std::move(site));
    calls_.push_back({it->second, std::move(stack)});
    return by_call_[call] = static_cast<uint32_t>(calls_.size() - 1);
  }
  // A description's site id (0: none); a site's text; a description's stack.
  uint32_t site_id(uint32_t desc) const { return calls_[desc].site; }
  const std::string& site(uint32_t site_id) const { return sites_[site_id]; }
  const std::string& stack(uint32_t desc) const { return calls_[desc].stack; }

 private:
  // (site, stack text) of a Python call and its ancestors.
  std::pair<std::string, std::string> describe(int64_t call) const {
    std::vector<std::string> names, files;
    std::vector<int64_t> lines;
    for (int64_t i = call; i >= 0 && names.size() < 256;) {
      const auto& pc = t_.pycalls[static_cast<size_t>(i)];
      std::string_view text = t_.names.get(pc.name);
      size_t open = text.find('('), close = text.find("): ");
      if (open != std::string_view::npos && close != std::string_view::npos && open < close) {
        files.emplace_back(text.substr(0, open));
        int64_t line = 0;
        std::from_chars(text.data() + open + 1, text.data() + close, line);
        lines.push_back(line);
        names.emplace_back(text.substr(close + 3));
      } else {  // "<built-in ...>", "nn.Module: X": no file
        files.emplace_back();
        lines.push_back(0);
        names.emplace_back(text);
      }
      auto p = by_id_.find(pc.parent);
      i = pc.parent >= 0 && p != by_id_.end() ? static_cast<int64_t>(p->second) : -1;
    }
    std::vector<FrameKind> kinds;
    for (size_t i = 0; i < names.size(); ++i)
      kinds.push_back(classify_frame(names[i], files[i], uc_));
    std::pair<std::string, std::string> out;
    int site = site_index(kinds);
    if (site >= 0) {
      auto s = static_cast<size_t>(site);
      out.first = frame_label(names[s], files[s], lines[s]);
      out.second = describe_kinds(
          kinds, 3, [&](size_t i) { return frame_label(names[i], files[i], lines[i]); });
    }
    return out;
  }

  const Trace& t_;
  const UserCode& uc_;
  std::unordered_map<int64_t, uint32_t> by_id_;
  std::unordered_map<uint32_t, int64_t> call_of_;
  std::unordered_map<int64_t, uint32_t> by_call_;
  std::unordered_map<std::string, uint32_t> index_;  // site text -> id
  std::vector<std::string> sites_;
  struct Described {
    uint32_t site;
    std::string stack;
  };
  std::vector<Described> calls_;
};

}  // namespace memsight::profile
