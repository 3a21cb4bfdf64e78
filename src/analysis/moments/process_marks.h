#pragma once
// The step marks of the whole process a snapshot records. torch records an
// annotation on the device that is current when it runs, so in a job where
// one process drives several GPUs every memsight.torch.mark_step(),
// profiler step and optimizer step lands on one device (usually 0). A
// device with no marks of its own borrows the process's (docs/leaks.md,
// "Iterations"): step marks begin an iteration of the process's loop on
// every device; an optimizer step is a boundary on the devices it touched
// (a trace entry of theirs falls between its START and its END).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "memsight/leaks.h"
#include "memsight/snapshot.h"

namespace memsight {

// One START annotation: when, its step number (-1: none in its name) and
// when its END came (its own time where none did).
struct StepMark {
  int64_t time = 0, number = -1, end = 0;
};

// The START annotations named with `prefix` of `device`, by time.
std::vector<StepMark> device_marks(const Snapshot& snap, int64_t device, std::string_view prefix);

// The marks of every device, per prefix, read from the snapshot once (on
// first use: most devices have marks of their own).
class ProcessMarks {
 public:
  explicit ProcessMarks(const Snapshot& snap) : snap_(snap) {}
  // By time; of marks at the same time, the first (they begin the same
  // iteration); optimizer steps with each one's end raised to the latest end
  // up to it (`latest_end`), so that the steps holding a time are found by
  // two binary searches.
  const std::vector<StepMark>& of(size_t source, std::string_view prefix);

 private:
  const Snapshot& snap_;
  std::optional<std::vector<StepMark>> marks_[3];
};

// find_iterations (memsight/leaks.h) for a loop over a snapshot's devices:
// the process's marks read once.
Iterations find_iterations(const Snapshot& snap, size_t device, ProcessMarks& process);

}  // namespace memsight
