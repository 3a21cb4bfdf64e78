// libFuzzer target: a big trace decoded in shares on helper threads must
// read exactly as on one thread, whatever the damage. Fuzzed inputs are too
// small to span the pickle frames a share needs, so the input here is a
// list of patches onto a real snapshot of 153 frames: 4 bytes each, a
// 24-bit position in its trace and the byte to write there; a first byte
// of 0xf0 or more also cuts the snapshot at the last patch's position. The
// read on four threads with 16 KiB shares must give the snapshot that the
// one-thread read gives (written back), or the same error.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "memsight/error.h"
#include "memsight/reader.h"
#include "pickle/row_chunks.h"
#include "pickle/unpickler.h"
#include "util/parallel.h"

namespace {

const std::string& base() {
  static const std::string bytes = [] {
    std::ifstream in(MEMSIGHT_TEST_DATA "/transformer_train.pickle", std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    if (s.str().size() < (256 << 10)) std::abort();  // the base snapshot is missing
    return s.str();
  }();
  return bytes;
}

// The snapshot written back, or the error, of a full read with `threads`
// threads and shares of `share` bytes.
std::string outcome(std::string_view bytes, unsigned threads, size_t share) {
  memsight::thread_limit = threads;
  memsight::decode_stats::share_bytes = share;
  std::string out;
  try {
    out = memsight::pickle_snapshot(memsight::read_snapshot_bytes(bytes));
  } catch (const memsight::Error& e) {
    out = std::string("error: ") + e.what();
  }
  memsight::thread_limit = 0;
  memsight::decode_stats::share_bytes = size_t{2} << 20;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& b = base();
  static const size_t trace = b.find("device_traces");
  if (trace == std::string::npos) std::abort();
  std::string bytes = b;
  size_t at = bytes.size();
  for (size_t i = 0; i + 4 <= size && i < 4 * 64; i += 4) {
    uint32_t pos = uint32_t{data[i]} << 16 | uint32_t{data[i + 1]} << 8 | data[i + 2];
    at = trace + pos % (bytes.size() - trace);
    bytes[at] = static_cast<char>(data[i + 3]);
  }
  if (size >= 4 && data[0] >= 0xf0) bytes.resize(at);
  if (outcome(bytes, 1, size_t{2} << 20) != outcome(bytes, 4, 16 << 10)) std::abort();
  return 0;
}
