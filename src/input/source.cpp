#include "input/source.h"

#include <fcntl.h>
#ifdef MEMSIGHT_HAVE_LZMA
#include <lzma.h>
#endif
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "memsight/error.h"
#include "memsight/io.h"

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

// A stream (a pipe, a decompressor) with its first bytes read ahead, so that
// they can be looked at (head()) before a reader starts.
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

constexpr size_t kInChunk = 1 << 18;

class GzipSource : public ByteSource {
 public:
  explicit GzipSource(std::unique_ptr<ByteSource> in) : in_(std::move(in)), buf_(kInChunk) {
    std::memset(&zs_, 0, sizeof zs_);
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw Error("gzip: cannot initialise zlib");
  }
  ~GzipSource() override { inflateEnd(&zs_); }
  size_t read(char* dst, size_t n) override {
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(n);
    while (zs_.avail_out == n && !done_) {
      if (zs_.avail_in == 0) {
        size_t k = in_->read(buf_.data(), buf_.size());
        if (k == 0) throw Error("gzip: compressed data is truncated");
        zs_.next_in = reinterpret_cast<Bytef*>(buf_.data());
        zs_.avail_in = static_cast<uInt>(k);
      }
      int r = inflate(&zs_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        // Concatenated gzip members are legal; continue if more input follows.
        if (zs_.avail_in == 0) {
          size_t k = in_->read(buf_.data(), buf_.size());
          if (k == 0) {
            done_ = true;
            break;
          }
          zs_.next_in = reinterpret_cast<Bytef*>(buf_.data());
          zs_.avail_in = static_cast<uInt>(k);
        }
        inflateReset(&zs_);
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        throw Error(std::string("gzip: corrupted compressed data (") + (zs_.msg ? zs_.msg : "?") +
                    ")");
      }
    }
    return n - zs_.avail_out;
  }
  uint64_t consumed() const override { return in_->consumed(); }
  uint64_t total() const override { return in_->total(); }
  std::string_view compression() const override { return "gzip"; }

 private:
  std::unique_ptr<ByteSource> in_;
  std::vector<char> buf_;
  z_stream zs_;
  bool done_ = false;
};

class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(std::unique_ptr<ByteSource> in)
      : in_(std::move(in)), buf_(kInChunk), ds_(ZSTD_createDStream()) {
    if (!ds_) throw Error("zstd: cannot initialise decoder");
    ZSTD_initDStream(ds_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(ds_); }
  size_t read(char* dst, size_t n) override {
    ZSTD_outBuffer out{dst, n, 0};
    while (out.pos == 0 && !done_) {
      if (inb_.pos == inb_.size) {
        size_t k = in_->read(buf_.data(), buf_.size());
        if (k == 0) {
          if (!frame_done_) throw Error("zstd: compressed data is truncated");
          done_ = true;
          break;
        }
        inb_ = {buf_.data(), k, 0};
      }
      size_t r = ZSTD_decompressStream(ds_, &out, &inb_);
      if (ZSTD_isError(r))
        throw Error(std::string("zstd: corrupted compressed data (") + ZSTD_getErrorName(r) + ")");
      frame_done_ = (r == 0);
    }
    return out.pos;
  }
  uint64_t consumed() const override { return in_->consumed(); }
  uint64_t total() const override { return in_->total(); }
  std::string_view compression() const override { return "zstd"; }

 private:
  std::unique_ptr<ByteSource> in_;
  std::vector<char> buf_;
  ZSTD_DStream* ds_;
  ZSTD_inBuffer inb_{nullptr, 0, 0};
  bool done_ = false;
  bool frame_done_ = false;
};

#ifdef MEMSIGHT_HAVE_LZMA
class XzSource : public ByteSource {
 public:
  explicit XzSource(std::unique_ptr<ByteSource> in) : in_(std::move(in)), buf_(kInChunk) {
    if (lzma_stream_decoder(&zs_, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
      throw Error("xz: cannot initialise decoder");
  }
  ~XzSource() override { lzma_end(&zs_); }
  size_t read(char* dst, size_t n) override {
    zs_.next_out = reinterpret_cast<uint8_t*>(dst);
    zs_.avail_out = n;
    while (zs_.avail_out == n && !done_) {
      lzma_action action = LZMA_RUN;
      if (zs_.avail_in == 0 && !eof_) {
        size_t k = in_->read(buf_.data(), buf_.size());
        if (k == 0) eof_ = true;
        zs_.next_in = reinterpret_cast<uint8_t*>(buf_.data());
        zs_.avail_in = k;
      }
      if (eof_) action = LZMA_FINISH;
      lzma_ret r = lzma_code(&zs_, action);
      if (r == LZMA_STREAM_END) {
        done_ = true;
      } else if (r != LZMA_OK) {
        throw Error(r == LZMA_BUF_ERROR ? "xz: compressed data is truncated"
                                        : "xz: corrupted compressed data");
      }
    }
    return n - zs_.avail_out;
  }
  uint64_t consumed() const override { return in_->consumed(); }
  uint64_t total() const override { return in_->total(); }
  std::string_view compression() const override { return "xz"; }

 private:
  std::unique_ptr<ByteSource> in_;
  std::vector<char> buf_;
  lzma_stream zs_ = LZMA_STREAM_INIT;
  bool eof_ = false, done_ = false;
};

#endif

// Stops a decompressor whose output runs far past its input: a few bytes
// of gzip or zstd can claim gigabytes. The limit is 100 times the compressed
// file's size plus 64 MiB; on a pipe, whose size is unknown, it grows with
// the compressed bytes read so far, so a stream is judged as it arrives.
// Per thread: a read runs on its caller's thread (helper threads only ever
// see mapped, uncompressed input), and Python may read in several threads.
thread_local uint64_t t_max_expanded = 0;

class ExpansionLimit : public ByteSource {
 public:
  explicit ExpansionLimit(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {}
  size_t read(char* dst, size_t n) override {
    if (n == 0) return 0;
    if (out_ >= limit()) {
      // At the limit: one more byte, if there is one, may have fed the
      // decompressor more input and so raised the limit.
      if (inner_->read(dst, 1) == 0) return 0;
      if (++out_ > limit()) fail();
      return 1;
    }
    size_t k = inner_->read(dst, static_cast<size_t>(std::min<uint64_t>(n, limit() - out_)));
    out_ += k;
    return k;
  }
  uint64_t consumed() const override { return inner_->consumed(); }
  uint64_t total() const override { return inner_->total(); }
  std::string_view compression() const override { return inner_->compression(); }

 private:
  uint64_t limit() const {
    if (t_max_expanded) return t_max_expanded;
    return std::min(kDefaultMaxExpanded, kExpansionAllowance + kExpansionRatio * compressed());
  }
  // The compressed size the limit is computed from: the file's, else what has arrived.
  uint64_t compressed() const { return inner_->total() ? inner_->total() : inner_->consumed(); }
  // Says which limit stopped the read, with the numbers it was computed from.
  [[noreturn]] void fail() const {
    uint64_t lim = limit(), read = compressed();
    std::string why;
    if (t_max_expanded)
      why = "the --max-expanded limit";
    else if (lim == kDefaultMaxExpanded)
      why = "the most any compressed input may expand to without --max-expanded";
    else if (inner_->total())
      why = "the limit for " + sized(read) +
            " of compressed file: " + std::to_string(kExpansionRatio) +
            " times its size plus 64 MiB, at most 32 GiB";
    else
      why = "the limit after " + sized(read) +
            " of compressed input: " + std::to_string(kExpansionRatio) +
            " times the compressed bytes read so far plus 64 MiB, at most 32 GiB";
    throw Error(std::string(inner_->compression()) + ": the input expands past " + sized(lim) +
                ", " + why + "; --max-expanded SIZE allows more");
  }
  // "119538264 bytes (114.0 MiB)"
  static std::string sized(uint64_t n) {
    char b[64];
    double v = static_cast<double>(n);
    const char* unit = v >= 1073741824.0 ? "GiB" : v >= 1048576.0 ? "MiB" : "KiB";
    double div = v >= 1073741824.0 ? 1073741824.0 : v >= 1048576.0 ? 1048576.0 : 1024.0;
    std::snprintf(b, sizeof b, "%llu bytes (%.1f %s)", static_cast<unsigned long long>(n), v / div,
                  unit);
    return b;
  }
  std::unique_ptr<ByteSource> inner_;
  uint64_t out_ = 0;
};

// The compression whose magic number the bytes start with: "gzip", "zstd",
// "xz" or "".
std::string_view magic(std::string_view d) {
  if (d.starts_with("\x1f\x8b")) return "gzip";
  if (d.starts_with("\x28\xb5\x2f\xfd")) return "zstd";
  if (d.starts_with(std::string_view("\xfd"
                                     "7zXZ\0",
                                     6)))
    return "xz";
  return "";
}

bool is_compressed(std::string_view d) { return !magic(d).empty(); }

// A source over the raw bytes that decompresses them when they are gzip,
// zstd or xz, with its first bytes read ahead (head()).
std::unique_ptr<ByteSource> wrap(std::unique_ptr<ByteSource> raw) {
  std::unique_ptr<ByteSource> src = read_ahead(std::move(raw), 6);
  std::string_view method = magic(src->head());
  if (method == "gzip")
    src = std::make_unique<ExpansionLimit>(std::make_unique<GzipSource>(std::move(src)));
  else if (method == "zstd")
    src = std::make_unique<ExpansionLimit>(std::make_unique<ZstdSource>(std::move(src)));
  else if (method == "xz") {
#ifdef MEMSIGHT_HAVE_LZMA
    src = std::make_unique<ExpansionLimit>(std::make_unique<XzSource>(std::move(src)));
#else
    throw Error("xz-compressed input: this memsight was built without liblzma");
#endif
  }
  return read_ahead(std::move(src), ByteSource::kHeadBytes);
}

}  // namespace

void set_max_expanded(uint64_t bytes) { t_max_expanded = bytes; }
uint64_t max_expanded_setting() { return t_max_expanded; }

std::unique_ptr<ByteSource> detect_compression(std::unique_ptr<ByteSource> raw) {
  return wrap(std::move(raw));
}

std::unique_ptr<ByteSource> open_source(const std::string& path) {
  if (path == "-") return wrap(std::make_unique<RawSource>(0, 0));
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
    return wrap(std::move(mapped));
  }
  return wrap(std::make_unique<RawSource>(fd, static_cast<uint64_t>(st.st_size)));
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
  return wrap(std::make_unique<RawSource>(data));
}

std::string compress(std::string_view data, std::string_view method) {
  if (method == "zstd") {
    std::string out(ZSTD_compressBound(data.size()), '\0');
    size_t r = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
    if (ZSTD_isError(r)) throw Error(std::string("zstd: ") + ZSTD_getErrorName(r));
    out.resize(r);
    return out;
  }
  if (method == "gzip") {
    z_stream zs{};
    if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw Error("gzip: cannot initialise zlib");
    std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    int r = deflate(&zs, Z_FINISH);
    deflateEnd(&zs);
    if (r != Z_STREAM_END) throw Error("gzip: compression failed");
    out.resize(zs.total_out);
    return out;
  }
  if (method == "xz") {
#ifdef MEMSIGHT_HAVE_LZMA
    // xz's default level (6), as `xz` writes: snapshots shrink 10-30 times.
    std::string out(lzma_stream_buffer_bound(data.size()), '\0');
    size_t pos = 0;
    lzma_ret r = lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr,
                                         reinterpret_cast<const uint8_t*>(data.data()), data.size(),
                                         reinterpret_cast<uint8_t*>(out.data()), &pos, out.size());
    if (r != LZMA_OK) throw Error("xz: compression failed");
    out.resize(pos);
    return out;
#else
    throw Error("xz output: this memsight was built without liblzma");
#endif
  }
  throw Error("unknown compression: " + std::string(method));
}

namespace {
struct Suffix {
  const char* suffix;
  const char* method;  // nullptr: a compression memsight does not write
};
constexpr Suffix kSuffixes[] = {
    {".gz", "gzip"},   {".zst", "zstd"},   {".zstd", "zstd"}, {".xz", "xz"},
    {".bz2", nullptr}, {".lz4", nullptr},  {".zip", nullptr}, {".7z", nullptr},
    {".br", nullptr},  {".lzma", nullptr}, {".lz", nullptr},  {".Z", nullptr},
};
const Suffix* suffix_of(std::string_view path) {
  for (const Suffix& s : kSuffixes)
    if (path.ends_with(s.suffix) && path.size() > std::strlen(s.suffix)) return &s;
  return nullptr;
}
}  // namespace

std::string compression_for_name(std::string_view path) {
  const Suffix* s = suffix_of(path);
  if (!s) return "";
  if (!s->method)
    throw Error(std::string(path) + ": memsight does not write " + (s->suffix + 1) +
                " files; name it .gz, .zst or .xz to compress, or leave the suffix out");
  return s->method;
}

std::string_view without_compression_suffix(std::string_view path) {
  const Suffix* s = suffix_of(path);
  return s ? path.substr(0, path.size() - std::strlen(s->suffix)) : path;
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
