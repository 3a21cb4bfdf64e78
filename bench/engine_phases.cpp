// In-process timings of the engine's phases on one snapshot: the read, the
// replay, the simulation under the recorded settings, and the whole summary.
// Built on demand (not part of `all`):
//   cmake --build --preset release --target engine_phases
//   build/release/engine_phases SNAPSHOT [repeats]
// Prints the median and the fastest of each phase in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "analysis/replay.h"
#include "analysis/simulate.h"
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
  using namespace memsight;
  std::vector<double> read, replay, sim, sum;
  Snapshot snap;
  for (int i = 0; i < repeats; ++i) read.push_back(ms_of([&] { snap = read_snapshot_file(argv[1]); }));
  alloc::Settings s = alloc::Settings::recorded(snap);
  int64_t sink = 0;
  for (int i = 0; i < repeats; ++i) {
    replay.push_back(ms_of([&] {
      for (size_t d = 0; d < snap.device_count(); ++d) sink += replay::run(snap, d, s).peak.reserved;
    }));
    sim.push_back(ms_of([&] {
      for (size_t d = 0; d < snap.device_count(); ++d) {
        simulate::Plan p = simulate::plan(snap, d);
        sink += simulate::run(snap, p, simulate::Inputs::recorded(snap, p)).peak.reserved;
      }
    }));
    sum.push_back(ms_of([&] { sink += summarize(snap).total_entries; }));
  }
  report("read (full)", read);
  report("replay (all devices)", replay);
  report("simulation, recorded settings", sim);
  report("summarize", sum);
  return sink == 42;
}
