#pragma once
// The temporaries that files written whole (atomic_file.cpp) pass through:
// their names, the ones in flight (so a signal can remove them), and the
// ones a killed run left behind.

#include <string>

namespace memsight::temp_files {

// ".NAME.memsight-tmp-" for a target named NAME: every temporary of that
// target starts with it, followed by the writer's process id, '-' and a
// random tag. A very long NAME is cut so that the temporary's name still fits
// in a folder entry.
std::string prefix_for(const std::string& filename);

// Removes the temporaries of `prefix` in `dir` whose writer (the process id
// in the name) no longer runs: a run killed with SIGKILL cannot remove its
// own. Temporaries of a running process are left alone. Never throws.
void remove_stale(const std::string& dir, const std::string& prefix) noexcept;

// A temporary being written, known to the signal handler that
// remove_on_signals installs until the rename or the unlink ends it.
class InFlight {
 public:
  explicit InFlight(const std::string& path);
  ~InFlight();
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  int slot_ = -1;  // -1: too many in flight at once to track (removed on errors only)
};

}  // namespace memsight::temp_files
