// libFuzzer target: torch.profiler outputs. The first byte picks the
// reader: the Chrome trace (read from a memory file, as a path, since the
// reader streams from files), then the step report and its text, JSON and
// page; or the memory timeline from bytes and its page. Built only where
// src/profile exists.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "memsight/error.h"
#include "memsight/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] & 1) {
      (void)memsight::timeline_html(memsight::read_memory_timeline_bytes(in), "fuzz");
      return 0;
    }
    int fd = ::memfd_create("fuzz_profile", MFD_CLOEXEC);
    if (fd < 0) return 0;
    bool written = ::write(fd, in.data(), in.size()) == static_cast<ssize_t>(in.size());
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
      if (written) {
        memsight::ProfileTrace t = memsight::read_profile_trace(path);
        memsight::ProfileReport r = memsight::analyze_profile(t);
        (void)memsight::profile_text(r);
        (void)memsight::profile_json(r);
        (void)memsight::profile_html(r, "fuzz");
      }
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  } catch (const memsight::Error&) {
  }
  return 0;
}
