#pragma once
// Byte sources for readers: a file read in chunks, decompressed on the fly
// when it starts with a gzip, zstd or xz magic number. Streaming keeps peak
// memory independent of the file size.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace memsight {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes; returns 0 at the end. Throws Error on I/O or
  // decompression failure.
  virtual size_t read(char* dst, size_t n) = 0;
  // Bytes of the underlying file consumed so far / in total (0 if unknown),
  // for progress reports.
  virtual uint64_t consumed() const = 0;
  virtual uint64_t total() const = 0;
  // "gzip", "zstd", "xz" or "" for plain input.
  virtual std::string_view compression() const { return ""; }
  // Plain files are memory-mapped: the whole input, readable in place
  // (empty for other sources). release() gives back the pages before
  // `offset` so resident memory stays small while a reader walks forward.
  virtual std::string_view mapped() const { return {}; }
  virtual void release(uint64_t /*offset*/) {}
  // Gives back the whole pages inside [from, to) of the mapping; safe to
  // call from several threads on disjoint ranges.
  virtual void drop(uint64_t /*from*/, uint64_t /*to*/) const {}
  // Copies n bytes at `offset` of a mapped input without touching the
  // mapping (no page comes in); false if out of range or unsupported.
  virtual bool peek_at(uint64_t /*offset*/, void* /*dst*/, size_t /*n*/) const { return false; }
  // The first kHeadBytes of the input (decompressed), or all of it when
  // shorter, whatever has been read: what a file is shows in them
  // (input_kind.h). Sources from open_source and memory_source have them.
  static constexpr size_t kHeadBytes = 4096;
  virtual std::string_view head() const { return mapped().substr(0, kHeadBytes); }
};

// Opens `path` ("-" is standard input) and detects compression.
std::unique_ptr<ByteSource> open_source(const std::string& path);
// A source over memory (also decompressing when the bytes are compressed).
std::unique_ptr<ByteSource> memory_source(std::string_view data);
// Any raw source (the standalone viewer's file, read in pieces), decompressed
// when it starts with a gzip, zstd or xz magic number, under the same
// expansion limit as files.
std::unique_ptr<ByteSource> detect_compression(std::unique_ptr<ByteSource> raw);

// Runs read() and starts any error it throws with the input's name ("-":
// standard input), as every message about an input does.
std::string input_name(const std::string& path);
[[noreturn]] void rethrow_named(const std::string& path);
template <typename Read>
auto read_named(const std::string& path, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (...) {
    rethrow_named(path);
  }
}

// Compresses a whole buffer ("gzip", "zstd" or "xz").
std::string compress(std::string_view data, std::string_view method);
// The compression an output file's name asks for: "gzip" (.gz), "zstd"
// (.zst, .zstd), "xz" (.xz), or "" for none. A suffix of a compression
// memsight does not write (.bz2, .lz4, .zip, ...) is an Error.
std::string compression_for_name(std::string_view path);
// The name without its compression suffix ("x.pickle.gz" -> "x.pickle").
std::string_view without_compression_suffix(std::string_view path);

}  // namespace memsight
