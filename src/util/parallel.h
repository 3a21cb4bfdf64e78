#pragma once
// Work spread over a few threads: f(i) for every i in [0, n).
#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace memsight {

// Threads the engine may use at once (reads, summaries, simulations):
// `thread_limit` when set (a test hook), else $MEMSIGHT_THREADS, else one per
// hardware thread; always 1 in the standalone viewer's WebAssembly engine.
extern std::atomic<unsigned> thread_limit;
unsigned threads_allowed();

// Runs f(i) for i in [0, n) on `jobs` threads, the caller's among them
// (fewer when threads cannot be had: the caller's thread does the rest).
// After an exception no new i starts; the one of the lowest i is rethrown
// once every thread has ended.
template <typename F>
void parallel_for(size_t n, size_t jobs, F&& f) {
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(n);
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
        next.store(n);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(std::min(jobs, n));
  try {
    for (size_t t = 1; t < std::min(jobs, n); ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
  }
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace memsight
