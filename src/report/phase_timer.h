#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace memsight::report {

// MEMSIGHT_TIMING=1 prints how long each step of render_html takes.
class PhaseTimer {
 public:
  PhaseTimer() : on_(std::getenv("MEMSIGHT_TIMING") != nullptr), last_(Clock::now()) {}
  void operator()(const char* what) {
    if (!on_) return;
    auto now = Clock::now();
    std::fprintf(stderr, "render_html: %-12s %7.1f ms\n", what,
                 std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  Clock::time_point last_;
};

}  // namespace memsight::report
