#pragma once
// Reading and writing snapshot files. One reader and one writer per format,
// shared by the CLI, the Python module and the tests.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "memsight/error.h"
#include "memsight/snapshot.h"

namespace memsight {

// Called now and then while reading with (bytes consumed, total bytes or 0).
using Progress = std::function<void(uint64_t done, uint64_t total)>;

// How much of a snapshot to decode.
enum class ReadScope {
  // Everything: segments, blocks and every trace entry.
  Everything,
  // Segments and blocks only, for reports that never look at the trace
  // (stats, segments, memory, compare). The trace is still checked to be a
  // well-formed pickle, opcode by opcode, but its entries are not decoded:
  // the result has no trace rows and Snapshot::trace_skipped is set.
  SegmentsOnly,
};

// A compressed input may expand to at most kExpansionAllowance bytes plus
// kExpansionRatio times its compressed size (of a stream of unknown size:
// the compressed bytes read so far), and never past
// kDefaultMaxExpanded; set_max_expanded(n) replaces both limits by n bytes
// (0 restores them). Applies to later reads on the calling thread.
inline constexpr uint64_t kExpansionRatio = 100;
inline constexpr uint64_t kExpansionAllowance = uint64_t{64} << 20;
inline constexpr uint64_t kDefaultMaxExpanded = uint64_t{32} << 30;
void set_max_expanded(uint64_t bytes);
// The calling thread's setting (0: the defaults), to hand to helper threads.
uint64_t max_expanded_setting();

// Reads a snapshot pickle (protocols 2-5), plain or gzip/zstd/xz-compressed
// (detected by magic bytes). Never runs code: opcodes that import or call
// are refused. Throws memsight::Error with a one-line message.
Snapshot read_snapshot_file(const std::string& path, const Progress& progress = {},
                            ReadScope scope = ReadScope::Everything);
Snapshot read_snapshot_bytes(std::string_view data, ReadScope scope = ReadScope::Everything);

// Serialises a snapshot as a protocol-4 pickle that pickle.load and torch's
// tools read back into the same dicts.
std::string pickle_snapshot(const Snapshot& snap);
// Only the segments list (what torch.cuda.memory_snapshot() returns), for
// callers that need the live blocks as Python objects but not the trace.
std::string pickle_segments(const Snapshot& snap);
// Writes to a temporary name beside `path`, then renames; compresses with
// gzip for ".gz" and zstd for ".zst"/".zstd" names.
void write_snapshot_file(const Snapshot& snap, const std::string& path);

// Writes `content` to `path` atomically (temp file + rename). Throws Error.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace memsight
