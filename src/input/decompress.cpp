// Decompressing sources (gzip, zstd, xz) and the limit on how far their
// output may run past their input.
#include <zlib.h>
#include <zstd.h>
#ifdef MEMSIGHT_HAVE_LZMA
#include <lzma.h>
#endif

#include <cstring>
#include <vector>

#include "input/source_parts.h"
#include "memsight/error.h"
#include "memsight/io.h"

namespace memsight {
namespace {

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

}  // namespace

bool is_compressed(std::string_view d) { return !magic(d).empty(); }

// A source over the raw bytes that decompresses them when they are gzip,
// zstd or xz, with its first bytes read ahead (head()).
std::unique_ptr<ByteSource> decompressing(std::unique_ptr<ByteSource> raw) {
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

void set_max_expanded(uint64_t bytes) { t_max_expanded = bytes; }
uint64_t max_expanded_setting() { return t_max_expanded; }

std::unique_ptr<ByteSource> detect_compression(std::unique_ptr<ByteSource> raw) {
  return decompressing(std::move(raw));
}

}  // namespace memsight
