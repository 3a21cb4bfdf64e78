// What a history leaves out at its end, and where allocated memory was
// going when it stopped (see whatif.h, Truncation). A job that died of an
// OOM recorded nothing after it: a setting that lets the request fit is
// simulated only up to there, and if memory was still climbing, it only
// moves the OOM later.
#include <algorithm>

#include "analysis/whatif/whatif.h"
#include "memsight/leaks.h"

namespace memsight::whatif {
namespace {

// Entries before the OOM the growth is measured over: the last quarter of
// them, at least 8 (fewer say nothing steady).
constexpr int32_t kMinWindow = 8;
// Steps measured, when the history marks them: the last few whole ones.
constexpr size_t kSteps = 4;

// The last recorded OOM when only frees and segment releases follow it.
int32_t final_oom(const Snapshot& snap, const simulate::Plan& p) {
  if (p.recorded_ooms.empty()) return -1;
  const int32_t oom = p.recorded_ooms.back();
  for (size_t i = static_cast<size_t>(oom) + 1; i < p.rows.size(); ++i)
    if (snap.trace.action[p.trace.begin + i] == Action::Alloc) return -1;
  return oom;
}

// Allocated bytes after each of the first `n` entries, from the trace's own
// allocs and completed frees (the blocks live before it are a constant).
std::vector<int64_t> allocated_by_entry(const Snapshot& snap, const simulate::Plan& p, int32_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  int64_t now = 0;
  for (int32_t i = 0; i < n; ++i) {
    const uint32_t row = p.trace.begin + static_cast<uint32_t>(i);
    const Action a = snap.trace.action[row];
    if (a == Action::Alloc) now += snap.trace.size[row];
    if (a == Action::FreeCompleted) now -= snap.trace.size[row];
    out[static_cast<size_t>(i)] = now;
  }
  return out;
}

// Growth over points of `at` (allocated memory at each): steady when every
// stretch between them grew.
void measure(Truncation& t, const std::vector<int64_t>& at) {
  t.growth = at.back() - at.front();
  t.steady = t.growth > 0;
  for (size_t i = 1; i < at.size(); ++i) t.steady = t.steady && at[i] > at[i - 1];
}

}  // namespace

Truncation truncation(const Snapshot& snap, const simulate::Plan& p) {
  Truncation t;
  t.ends_at_oom = final_oom(snap, p);
  if (t.ends_at_oom < 0) return t;
  const std::vector<int64_t> alloc = allocated_by_entry(snap, p, t.ends_at_oom);
  // Steps, where the history marks them and at least two whole ones
  // precede the OOM: allocated memory at the start of each.
  const Iterations its = find_iterations(snap, p.device);
  std::vector<int64_t> starts;
  for (int64_t s : its.starts)
    if (s > 0 && s < t.ends_at_oom) starts.push_back(s);
  if (its.source != "repeating allocations" && starts.size() >= 3) {
    if (starts.size() > kSteps + 1) starts.erase(starts.begin(), starts.end() - (kSteps + 1));
    std::vector<int64_t> at;
    for (int64_t s : starts) at.push_back(alloc[static_cast<size_t>(s - 1)]);
    t.by_steps = true;
    t.window = static_cast<int64_t>(starts.size()) - 1;
    measure(t, at);
    return t;
  }
  const int32_t n = t.ends_at_oom;
  const int32_t window = std::max(kMinWindow, n / 4);
  if (n < window) return t;
  // The highest allocated memory in each quarter of the window: within a
  // step it rises and falls, so the high-water marks say where it goes.
  std::vector<int64_t> at;
  for (int k = 0; k < 4; ++k) {
    auto from = alloc.begin() + (n - window + window * k / 4);
    auto to = alloc.begin() + (n - window + window * (k + 1) / 4);
    at.push_back(*std::max_element(from, to));
  }
  // From the first quarter's mark to the last's: three quarters apart.
  t.window = std::max<int64_t>(1, window * 3 / 4);
  measure(t, at);
  return t;
}

int64_t postponed_by(const DeviceReport& d, const Outcome& o) {
  const Truncation& t = d.truncation;
  if (t.ends_at_oom < 0 || !t.steady || t.window <= 0 || !avoids(o, t.ends_at_oom)) return -1;
  const simulate::Device& m = o.alt.device;
  const int64_t cap = m.limit >= 0 ? m.limit : m.capacity;
  if (cap < 0) return -1;
  // The room left under the cap once the request fits, at the pace
  // allocated memory grew before it: optimistic, since reserved memory
  // runs ahead of allocated memory.
  const int64_t room = std::max<int64_t>(0, cap - o.result.peak.allocated);
  const double per = static_cast<double>(t.growth) / static_cast<double>(t.window);
  return static_cast<int64_t>(static_cast<double>(room) / per);
}

}  // namespace memsight::whatif
