// Files written whole or not at all: a temporary beside the target, then a
// rename, so an error, a signal or a kill never leaves half a file under the
// name a user asked for. The replaced file's permissions carry over (a 0600
// report stays private), and a read-only file is not replaced unless the
// caller allows it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>

#include "input/temp_files.h"
#include "memsight/error.h"
#include "memsight/io.h"

namespace memsight {

namespace {

std::atomic<bool> g_replace_read_only{false};

void write_all(int fd, const std::string& path, std::string_view content) {
  size_t done = 0;
  while (done < content.size()) {
    ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(path + ": write failed: " + std::strerror(errno));
    }
    done += static_cast<size_t>(w);
  }
}

[[noreturn]] void cannot_write(const std::string& path, int err) {
  throw Error(path + ": cannot write: " + std::strerror(err));
}

// A device or a pipe (/dev/null, /dev/stdout, a fifo) is written in place:
// renaming over it would replace the device with a file.
void write_in_place(const std::string& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) cannot_write(path, errno);
  try {
    write_all(fd, path, content);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) cannot_write(path, errno);
}

// The file a name stands for: a symbolic link is written through (the link
// stays a link), a dangling one is replaced.
std::string resolved(const std::string& path) {
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return path;
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return path;
  std::string out(real);
  std::free(real);
  return out;
}

// The temporary: created empty (with the umask's mode, as a new file is),
// removed by its destructor unless renamed over the target.
class Temporary {
 public:
  Temporary(const std::string& dir, const std::string& prefix) {
    std::random_device rd;
    char tag[16];
    for (int tries = 0; fd_ < 0 && tries < 8; ++tries) {
      std::snprintf(tag, sizeof tag, "%06x", rd() & 0xffffff);
      path_ = dir + "/" + prefix + std::to_string(::getpid()) + "-" + tag;
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ >= 0) in_flight_.emplace(path_);
  }
  ~Temporary() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_ && fd_ != kNeverOpened) ::unlink(path_.c_str());
  }
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;

  bool opened() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Closes and renames over `target`; false (errno set) if either fails.
  bool commit(const std::string& target) {
    int fd = fd_;
    fd_ = kClosed;
    if (::close(fd) != 0) return false;
    renamed_ = std::rename(path_.c_str(), target.c_str()) == 0;
    return renamed_;
  }

 private:
  static constexpr int kNeverOpened = -1;
  static constexpr int kClosed = -2;
  std::string path_;
  int fd_ = kNeverOpened;
  bool renamed_ = false;
  std::optional<temp_files::InFlight> in_flight_;
};

}  // namespace

void set_replace_read_only(bool allow) { g_replace_read_only = allow; }

void write_file_atomic(const std::string& name, std::string_view content, bool force) {
  const std::string path = resolved(name);
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw Error(name + ": is a directory");
  if (exists && !S_ISREG(st.st_mode)) return write_in_place(path, content);
  // Write bits, not access(): root may write anything, yet a file its owner
  // made read-only is still one nobody meant to be overwritten.
  if (exists && !force && !g_replace_read_only &&
      ((st.st_mode & 0222) == 0 || ::access(path.c_str(), W_OK) != 0)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw Error(name + ": the file is read-only (mode " + mode + "); --force replaces it");
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string prefix = temp_files::prefix_for(path.substr(slash + 1));
  temp_files::remove_stale(dir, prefix);
  Temporary tmp(dir, prefix);
  if (!tmp.opened()) cannot_write(name, errno);
  if (exists && ::fchmod(tmp.fd(), st.st_mode & 07777) != 0) cannot_write(name, errno);
  write_all(tmp.fd(), name, content);
  if (!tmp.commit(path)) cannot_write(name, errno);
}

}  // namespace memsight
