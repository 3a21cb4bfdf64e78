#pragma once
// Memory paged in ahead of its use by a thread with nothing else to do: the
// kernel zeroes each new page at its first write, and on a big replay that
// zeroing is a good part of the time; done on a second core it leaves the
// thread that waits for the result.
#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace memsight {

// Makes [p, p + bytes) resident and writable without changing what it
// holds, so another thread may be writing there meanwhile. A no-op where the
// system cannot (then the first writes page it in, as without this).
inline void page_in(const void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  if (!p || !bytes) return;
  static const auto kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto start = reinterpret_cast<uintptr_t>(p) / kPage * kPage;
  ::madvise(reinterpret_cast<void*>(start), reinterpret_cast<uintptr_t>(p) + bytes - start,
            MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace memsight
