#include "util/parallel.h"

#include <cstdlib>

namespace memsight {

std::atomic<unsigned> thread_limit{0};

unsigned threads_allowed() {
#ifdef __EMSCRIPTEN__
  return 1;  // the standalone viewer's engine runs in one Web Worker, without threads
#endif
  if (unsigned n = thread_limit.load()) return n;
  if (const char* env = std::getenv("MEMSIGHT_THREADS")) {
    char* end = nullptr;
    unsigned long n = std::strtoul(env, &end, 10);
    if (end != env && *end == 0 && n > 0) return static_cast<unsigned>(std::min(n, 64ul));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace memsight
