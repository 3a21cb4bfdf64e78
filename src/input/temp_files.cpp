// Temporaries of files written whole: named so that anyone can tell whose
// they are (".report.txt.memsight-tmp-4242-9f3a1c"), removed by a signal that
// ends the run mid-write, and, when a run was killed outright (SIGKILL, a
// power cut), removed by the next write of the same file.
#include "input/temp_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "memsight/io.h"

namespace memsight::temp_files {
namespace {

// A folder entry holds at most 255 bytes; the suffix takes under 40.
constexpr size_t kMaxNamePart = 200;

// The temporaries in flight, readable from a signal handler: a slot's path
// is written while it is Claimed and read only while it is Live.
enum SlotState : int { Free, Claimed, Live };
struct Slot {
  std::atomic<int> state{Free};
  char path[4096];
};
constexpr int kSlots = 64;
Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the slots");

void remove_and_reraise(int sig) {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == Live) ::unlink(s.path);
  // SA_RESETHAND restored the default action: the signal, delivered again
  // when the handler returns, ends the process as it would have.
  ::raise(sig);
}

}  // namespace

std::string prefix_for(const std::string& filename) {
  return "." + filename.substr(0, kMaxNamePart) + ".memsight-tmp-";
}

void remove_stale(const std::string& dir, const std::string& prefix) noexcept {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    const char* p = e->d_name + prefix.size();
    long pid = 0;
    while (*p >= '0' && *p <= '9' && pid < (1L << 30)) pid = pid * 10 + (*p++ - '0');
    if (*p != '-' || pid <= 0 || pid == self) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

InFlight::InFlight(const std::string& path) {
  if (path.size() >= sizeof(Slot::path)) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = Free;
    if (!g_slots[i].state.compare_exchange_strong(expected, Claimed)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(Live, std::memory_order_release);
    slot_ = i;
    return;
  }
}

InFlight::~InFlight() {
  if (slot_ >= 0) g_slots[slot_].state.store(Free, std::memory_order_release);
}

}  // namespace memsight::temp_files

namespace memsight {

void remove_temporaries_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    // A signal the parent set to be ignored (nohup) stays ignored.
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = temp_files::remove_and_reraise;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace memsight
