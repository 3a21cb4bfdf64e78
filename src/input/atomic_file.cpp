// Files written whole or not at all: a temporary name beside the target,
// then a rename, so an error or a kill never leaves half a file under the
// name a user asked for.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "memsight/error.h"
#include "memsight/io.h"

namespace memsight {

namespace {
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
}  // namespace

void write_file_atomic(const std::string& path, std::string_view content) {
  namespace fs = std::filesystem;
  // A device or a pipe (/dev/null, /dev/stdout, a fifo) is written in place:
  // renaming over it would replace the device with a file.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory");
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot write: " + std::strerror(errno));
    try {
      write_all(fd, path, content);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) throw Error(path + ": cannot write: " + std::strerror(errno));
    return;
  }
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device rd;
  std::string tmp =
      (dir / ("." + target.filename().string() + ".tmp" + std::to_string(rd()))).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot write: " + std::strerror(errno));
  try {
    write_all(fd, path, content);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot write: " + std::strerror(e));
  }
}

}  // namespace memsight
