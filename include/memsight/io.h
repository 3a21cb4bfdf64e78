#pragma once
// Reading and writing bytes: progress of a read, the limit on how far a
// compressed input may expand, and files written whole or not at all. The
// input layer (src/input) implements them; every reader and writer above
// it uses them.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace memsight {

// Called now and then while reading with (bytes consumed, total bytes or 0).
using Progress = std::function<void(uint64_t done, uint64_t total)>;

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

// Writes `content` to `path` whole or not at all: into a temporary beside
// it (".NAME.memsight-tmp-PID-TAG"), then renamed over it. A replaced file
// keeps its permissions, a new one gets the umask's; a read-only file is
// refused unless `force` or set_replace_read_only(true); a link is written
// through; a device or pipe is written in place. Temporaries that a killed
// writer left for the same name are removed first. Throws Error.
void write_file_atomic(const std::string& path, std::string_view content, bool force = false);
// Whether write_file_atomic replaces read-only files (the CLI's --force), for
// every thread of the process; off by default.
void set_replace_read_only(bool allow);
// For an executable (a host such as Python owns its signals): SIGINT,
// SIGTERM and SIGHUP remove the temporaries being written, then end the
// process as they would have. A signal already ignored stays ignored.
void remove_temporaries_on_signals();

}  // namespace memsight
