// Byte sources: a file mapped in place, a stream read in chunks, memory;
// compressed input is handed to decompress.cpp.
#include "input/source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>

#include "input/source_parts.h"
#include "memsight/error.h"

namespace memsight {
namespace {

// Raw bytes from a file descriptor or from memory, with a small look-ahead
// so the magic number can be peeked without losing it.
class RawSource : public ByteSource {
 public:
  RawSource(int fd, uint64_t total) : fd_(fd), total_(total) {}
  explicit RawSource(std::string_view mem) : mem_(mem), total_(mem.size()) {}
  ~RawSource() override {
    if (fd_ > 0) ::close(fd_);
  }
  size_t read(char* dst, size_t n) override {
    if (fd_ < 0) {
      size_t k = static_cast<size_t>(std::min<uint64_t>(n, mem_.size() - pos_));
      std::memcpy(dst, mem_.data() + pos_, k);
      pos_ += k;
      return k;
    }
    while (true) {
      ssize_t r = ::read(fd_, dst, n);
      if (r >= 0) {
        pos_ += static_cast<uint64_t>(r);
        return static_cast<size_t>(r);
      }
      if (errno != EINTR) throw Error(std::string("read failed: ") + std::strerror(errno));
    }
  }
  uint64_t consumed() const override { return pos_; }
  uint64_t total() const override { return total_; }

 private:
  int fd_ = -1;
  std::string_view mem_;
  uint64_t pos_ = 0;
  uint64_t total_ = 0;
};

// A regular file mapped into memory: the reader parses it in place, and
// consumed pages are dropped so they stop counting as resident memory.
class MappedSource : public ByteSource {
 public:
  MappedSource(int fd, size_t size) : fd_(fd), size_(size) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error(std::string("cannot map file: ") + std::strerror(errno));
    }
    data_ = static_cast<const char*>(p);
    ::madvise(p, size, MADV_SEQUENTIAL);
  }
  ~MappedSource() override {
    ::munmap(const_cast<char*>(data_), size_);
    ::close(fd_);
  }
  bool peek_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size_ || n > size_ - offset) return false;
    return ::pread(fd_, dst, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n);
  }
  size_t read(char* dst, size_t n) override {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n, size_ - pos_));
    std::memcpy(dst, data_ + pos_, k);
    pos_ += k;
    return k;
  }
  uint64_t consumed() const override { return pos_; }
  uint64_t total() const override { return size_; }
  std::string_view mapped() const override { return {data_, size_}; }
  void release(uint64_t offset) override {
    uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    uint64_t upto = std::min<uint64_t>(offset, size_) / page * page;
    if (upto > released_) {
      ::madvise(const_cast<char*>(data_) + released_, upto - released_, MADV_DONTNEED);
      released_ = upto;
    }
    pos_ = std::max<uint64_t>(pos_, offset);
  }
  void drop(uint64_t from, uint64_t to) const override {
    uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    from = (from + page - 1) / page * page;
    to = std::min<uint64_t>(to, size_) / page * page;
    if (to > from) ::madvise(const_cast<char*>(data_) + from, to - from, MADV_DONTNEED);
  }

 private:
  int fd_;
  const char* data_ = nullptr;
  size_t size_;
  uint64_t pos_ = 0, released_ = 0;
};

// Replays peeked bytes before continuing with the inner source.
class PeekedSource : public ByteSource {
 public:
  PeekedSource(std::unique_ptr<ByteSource> inner, std::string head)
      : inner_(std::move(inner)), head_(std::move(head)) {}
  size_t read(char* dst, size_t n) override {
    if (head_pos_ < head_.size()) {
      size_t k = std::min(n, head_.size() - head_pos_);
      std::memcpy(dst, head_.data() + head_pos_, k);
      head_pos_ += k;
      return k;
    }
    return inner_->read(dst, n);
  }
  uint64_t consumed() const override { return inner_->consumed(); }
  uint64_t total() const override { return inner_->total(); }
  std::string_view compression() const override { return inner_->compression(); }
  std::string_view head() const override { return head_; }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::string head_;
  size_t head_pos_ = 0;
};

}  // namespace

std::unique_ptr<ByteSource> read_ahead(std::unique_ptr<ByteSource> inner, size_t n) {
  std::string head(n, '\0');
  size_t got = 0;
  while (got < n) {
    size_t k = inner->read(head.data() + got, n - got);
    if (k == 0) break;
    got += k;
  }
  head.resize(got);
  return std::make_unique<PeekedSource>(std::move(inner), std::move(head));
}

std::unique_ptr<ByteSource> open_source(const std::string& path) {
  if (path == "-") return decompressing(std::make_unique<RawSource>(0, 0));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(std::strerror(errno));  // the caller names the path
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error("is a directory, expected a snapshot file");
  }
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    auto mapped = std::make_unique<MappedSource>(fd, static_cast<size_t>(st.st_size));
    if (!is_compressed(mapped->mapped())) return mapped;
    return decompressing(std::move(mapped));
  }
  return decompressing(std::make_unique<RawSource>(fd, static_cast<uint64_t>(st.st_size)));
}

// Uncompressed bytes in memory, parsed in place like a mapped file.
class ViewSource : public ByteSource {
 public:
  explicit ViewSource(std::string_view data) : data_(data) {}
  size_t read(char* dst, size_t n) override {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n, data_.size() - pos_));
    std::memcpy(dst, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  uint64_t consumed() const override { return pos_; }
  uint64_t total() const override { return data_.size(); }
  std::string_view mapped() const override { return data_; }
  void release(uint64_t offset) override { pos_ = std::max<uint64_t>(pos_, offset); }
  bool peek_at(uint64_t offset, void* dst, size_t n) const override {
    if (offset > data_.size() || n > data_.size() - offset) return false;
    std::memcpy(dst, data_.data() + offset, n);
    return true;
  }

 private:
  std::string_view data_;
  uint64_t pos_ = 0;
};

std::unique_ptr<ByteSource> memory_source(std::string_view data) {
  if (!data.empty() && !is_compressed(data)) return std::make_unique<ViewSource>(data);
  return decompressing(std::make_unique<RawSource>(data));
}

std::string input_name(const std::string& path) { return path == "-" ? "standard input" : path; }

void rethrow_named(const std::string& path) {
  try {
    throw;
  } catch (const Error& e) {
    throw Error(input_name(path) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw Error(input_name(path) + ": out of memory while reading it");
  } catch (const std::length_error& e) {
    throw Error(input_name(path) + ": " + e.what());
  }
}

}  // namespace memsight
