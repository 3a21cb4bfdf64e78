#pragma once
// Reading and writing snapshot files. One reader and one writer per format,
// shared by the CLI, the Python module and the tests.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "memsight/error.h"
#include "memsight/io.h"
#include "memsight/snapshot.h"

namespace memsight {

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
// gzip for ".gz" and zstd for ".zst"/".zstd" names. A read-only file is
// replaced only with `force` (write_file_atomic).
void write_snapshot_file(const Snapshot& snap, const std::string& path, bool force = false);

}  // namespace memsight
