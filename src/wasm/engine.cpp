// The engine's entry points in WebAssembly, for the standalone viewer
// (`memsight viewer`). The page's Web Worker hands over a file it reads in
// pieces (Module.readChunk, synchronous File slices); the engine decompresses
// and reads it with the same safe reader as the CLI and returns the page's
// data as `memsight view` would embed it (render_page_data), or the same
// one-line error as the CLI.
//
//   page ──File──▶ worker ──readChunk(offset, n)──▶ FileSource ─▶ detect_compression
//                                                              ─▶ read_snapshot_named
//        ◀─pieces─ worker ◀──────── render_page_data ◀──────── Snapshot
#include <emscripten.h>

#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "input/source.h"
#include "memsight/error.h"
#include "memsight/html.h"
#include "snapshot/read_internal.h"

namespace {

// Copies up to n bytes of the file at `offset` into dst; returns how many.
// Pointers reach JavaScript as signed 32-bit numbers: `>>> 0` reads them
// right above 2 GiB of memory.
EM_JS(double, js_read_chunk, (char* dst, double offset, double n),
      { return Module.readChunk(dst >>> 0, offset, n); });
EM_JS(void, js_progress, (double done, double total), {
  if (Module.onProgress) Module.onProgress(done, total);
});
// Takes a copy of one piece of the page's data (its columns, as packed).
EM_JS(void, js_piece, (const char* data, double size), { Module.onPiece(data >>> 0, size); });

class FileSource : public memsight::ByteSource {
 public:
  explicit FileSource(uint64_t size) : size_(size) {}
  size_t read(char* dst, size_t n) override {
    if (pos_ >= size_) return 0;
    double k = js_read_chunk(dst, static_cast<double>(pos_), static_cast<double>(n));
    if (k < 0) throw memsight::Error("the browser could not read the file");
    pos_ += static_cast<uint64_t>(k);
    return static_cast<size_t>(k);
  }
  uint64_t consumed() const override { return pos_; }
  uint64_t total() const override { return size_; }

 private:
  uint64_t size_;
  uint64_t pos_ = 0;
};

std::string g_result;

}  // namespace

extern "C" {

// Reads the page's file (`size` bytes, shown as `name`) and computes the
// page data: its columns go to Module.onPiece as they are packed, and the
// blob's magic and header stay for memsight_result() (the blob is that, then
// the pieces). Returns 0, or 1 with the one-line error message in
// memsight_result() instead.
EMSCRIPTEN_KEEPALIVE int memsight_open(double size, const char* name) {
  g_result.clear();
  g_result.shrink_to_fit();
  try {
    const auto bytes = static_cast<uint64_t>(size);
    memsight::Snapshot snap = memsight::read_snapshot_named(
        [&] { return memsight::detect_compression(std::make_unique<FileSource>(bytes)); }, name,
        [](uint64_t done, uint64_t total) {
          js_progress(static_cast<double>(done), static_cast<double>(total));
        },
        memsight::ReadScope::Everything);
    memsight::HtmlOptions opts;
    opts.source_name = name;
    opts.title = std::string(name) + " - memsight";
    opts.source_bytes = bytes;
    opts.column_sink = [](std::string_view piece) {
      js_piece(piece.data(), static_cast<double>(piece.size()));
    };
    g_result = memsight::render_page_data(snap, opts);
    return 0;
  } catch (const memsight::Error& e) {
    g_result = e.what();
  } catch (const std::bad_alloc&) {
    g_result = std::string(name) + ": out of memory (the browser gives a page at most 4 GiB)";
  } catch (const std::exception& e) {
    g_result = std::string(name) + ": " + e.what();
  }
  return 1;
}

EMSCRIPTEN_KEEPALIVE const char* memsight_result() { return g_result.data(); }
EMSCRIPTEN_KEEPALIVE double memsight_result_size() { return static_cast<double>(g_result.size()); }
EMSCRIPTEN_KEEPALIVE void memsight_release() {
  g_result.clear();
  g_result.shrink_to_fit();
}

}  // extern "C"
