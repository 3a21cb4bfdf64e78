// Writing compressed output: a whole buffer compressed, and the compression
// an output file's name asks for.
#include <zlib.h>
#include <zstd.h>
#ifdef MEMSIGHT_HAVE_LZMA
#include <lzma.h>
#endif

#include <cstring>
#include <string>

#include "input/source.h"
#include "memsight/error.h"

namespace memsight {

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

}  // namespace memsight
