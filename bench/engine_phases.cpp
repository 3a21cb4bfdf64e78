// In-process timings of the engine's phases on one snapshot: the read, the
// replay, the simulation under the recorded settings, and the whole summary.
// Built on demand (not part of `all`):
//   cmake --build --preset release --target engine_phases
//   build/release/engine_phases SNAPSHOT [repeats]
// Prints the median and the fastest of each phase in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "allocator/device_trace.h"
#include "allocator/replay.h"
#include "allocator/simulate.h"
#include "memsight/reader.h"
#include "memsight/summary.h"

namespace {

double ms_of(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void report(const char* what, std::vector<double> t) {
  std::sort(t.begin(), t.end());
  std::printf("%-28s median %8.2f ms   fastest %8.2f ms   (%zu runs)\n", what, t[t.size() / 2],
              t.front(), t.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: engine_phases SNAPSHOT [repeats]\n");
    return 2;
  }
  int repeats = argc > 2 ? std::stoi(argv[2]) : 9;
  // ENGINE_PHASES_ONLY=simulation: only the simulation, `repeats` times (for a
  // profiler); =summarize: only summarize(); =replay: only the replay
  // (its start state included); =read: only the read (to subtract).
  const char* only_env = std::getenv("ENGINE_PHASES_ONLY");
  std::string only = only_env ? only_env : "";
  using namespace memsight;
  std::vector<double> read, start, planning, replay, sim, sum;
  Snapshot snap;
  for (int i = 0; i < (only.empty() ? repeats : 1); ++i)
    read.push_back(ms_of([&] { snap = read_snapshot_file(argv[1]); }));
  alloc::Settings s = alloc::Settings::recorded(snap);
  int64_t sink = 0;
  for (int i = 0; i < repeats; ++i) {
    if (only == "read") return 0;
    if (only == "summarize") {
      for (int k = 0; k < repeats; ++k)
        sum.push_back(ms_of([&] { sink += summarize(snap).total_entries; }));
      report("summarize", sum);
      return sink == 42;
    }
    if (only == "replay") {
      for (int k = 0; k < repeats; ++k)
        replay.push_back(ms_of([&] {
          for (size_t d = 0; d < snap.device_count(); ++d)
            sink += replay::run(snap, d, s).peak.reserved;
        }));
      report("replay (all devices)", replay);
      return sink == 42;
    }
    if (only == "simulation") {
      simulate::Plan p = simulate::plan(snap, 0);
      for (int k = 0; k < repeats; ++k)
        sim.push_back(ms_of([&] {
          sink += simulate::run(snap, p, simulate::Inputs::recorded(snap, p)).peak.reserved;
        }));
      report("simulation, recorded settings", sim);
      return sink == 42;
    }
    start.push_back(ms_of([&] {
      for (size_t d = 0; d < snap.device_count(); ++d)
        sink += alloc::read_device_trace(snap, d, s, 0).start.estimated;
    }));
    std::vector<simulate::Plan> plans;
    planning.push_back(ms_of([&] {
      for (size_t d = 0; d < snap.device_count(); ++d) plans.push_back(simulate::plan(snap, d));
    }));
    replay.push_back(ms_of([&] {
      for (size_t d = 0; d < snap.device_count(); ++d)
        sink += replay::run(snap, d, s).peak.reserved;
    }));
    sim.push_back(ms_of([&] {
      for (const simulate::Plan& p : plans)
        sink += simulate::run(snap, p, simulate::Inputs::recorded(snap, p)).peak.reserved;
    }));
    sum.push_back(ms_of([&] { sink += summarize(snap).total_entries; }));
  }
  report("read (full)", read);
  report("start state (all devices)", start);
  report("simulation plan", planning);
  report("replay (all devices)", replay);
  report("simulation, recorded settings", sim);  // without its plan
  report("summarize", sum);
  return sink == 42;
}
