#pragma once
// What changed between two moments: live memory by allocation site (the
// frame rule of memsight/frames.h), by kind and by module (the classifier of
// memsight/categories.h), and the allocator's reserved and free memory, in
// two snapshots or at two moments of one. Each moment is measured on its own
// (measure_moments), so two big snapshots are never held at once; the
// comparison needs only the two measurements. See docs/diff.md.

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memsight/categories.h"
#include "memsight/frames.h"
#include "memsight/holders.h"
#include "memsight/snapshot.h"
#include "memsight/text_tools.h"

namespace memsight {

// Live memory of one site at one moment.
struct SiteAmount {
  std::string site;
  FrameKind kind = FrameKind::Internal;
  std::string stack;        // user-first ("train.py:81:step <- ...  [+6 library frames]")
  std::string frames_json;  // every frame with its kind, as summary --json lists them
  int64_t bytes = 0, count = 0;
};

// One moment of one device, measured.
struct DiffMoment {
  std::string file;  // the snapshot's name as given
  int device = 0;
  std::string at;      // the moment as asked: "snapshot", "peak", "step:5", "1200", ...
  int64_t event = -1;  // the state after this trace entry (-1: before the first)
  int64_t entries = 0;
  int64_t time_us = 0;  // of that entry (0: not known)
  // torch's counters then, replayed: allocated_bytes, active_bytes,
  // reserved_bytes, requested_bytes; free memory inside the segments.
  int64_t allocated = 0, active = 0, reserved = 0, requested = 0;
  int64_t free_bytes = 0, free_blocks = 0, largest_free = 0;
  double fragmentation = 0;  // 1 - largest free block / free bytes
  // The free memory above is outside CUDA graphs' private pools; theirs
  // (kept for the graphs' replays) is this, where the device has any.
  bool graph_pools = false;
  int64_t graph_pool_free = 0;
  std::vector<SiteAmount> sites;  // largest first
  CategoryTotals categories;
  std::vector<std::pair<std::string, int64_t>>
      modules;  // bytes made in each module itself (names cut)
  // Folded stacks of the live blocks (torch's frames, as `memsight memory`
  // names them, but names past kNameLimit cut as in every report) -> bytes;
  // and the kinds of their frames, for colours.
  std::unordered_map<std::string, int64_t> folded;
  std::unordered_map<std::string, FrameKind> frame_kinds;
  std::string note;  // why the numbers are estimates, if they are ("" when exact)
  // At the moment "snapshot" only (the dump): the live blocks by the holder
  // memsight.torch named then (memsight_holders; empty without it).
  std::vector<HeldAmount> held;
};

// The default device of a snapshot: the lowest with trace entries, else with
// segments, else 0; and the others it uses.
std::pair<size_t, std::vector<size_t>> default_device(const Snapshot& snap);

// BEFORE's and AFTER's moments from those asked, in order: with one
// snapshot, BEFORE at the first and AFTER at the second or the end; with
// two, both at their ends, or one moment for both, or the first for BEFORE
// and the second for AFTER. Throws Error for more than two, or none with one
// snapshot.
std::pair<std::string, std::string> diff_plan(bool two_snapshots,
                                              const std::vector<std::string>& moments);

// The moments `at` of `device` (docs/diff.md, "Moments"), from one replay.
// Throws Error for a device or moment the snapshot does not have.
std::vector<DiffMoment> measure_moments(const Snapshot& snap, const std::string& file,
                                        size_t device, const std::vector<std::string>& at,
                                        const UserCode& user_code = {});

// Why two moments should not be compared, in a sentence ("" when they may
// be): they are of different devices, or of different ranks by their files'
// names (rank3_*.pickle).
std::string mismatch(const DiffMoment& before, const DiffMoment& after);

struct SiteChange {
  std::string site;
  FrameKind kind = FrameKind::Internal;
  std::string stack, frames_json;  // from AFTER where the site is live there, else from BEFORE
  int64_t before = 0, after = 0, before_count = 0, after_count = 0;
  int64_t change() const { return after - before; }
  // "grew", "shrank", "appeared", "vanished" or "same"
  std::string_view status() const;
};

struct ModuleChange {
  std::string name;  // "" is the model itself
  int64_t before = 0, after = 0;
};

struct SnapshotDiff {
  DiffMoment before, after;
  std::vector<SiteChange> sites;  // every site of either, largest change first
  std::vector<ModuleChange> modules;
};

// The moments' sites keep their numbers; their stacks move to the changes.
SnapshotDiff diff_moments(DiffMoment before, DiffMoment after);
std::string diff_text(const SnapshotDiff& d);
std::string diff_json(const SnapshotDiff& d);
// The difference as folded stacks: "grew;<stack> BYTES" and "shrank;<stack> BYTES".
Folded diff_folded(const SnapshotDiff& d);
// The SVG flamegraph of diff_folded: growth red, shrinkage blue.
std::string diff_svg(const SnapshotDiff& d);
// A self-contained page: the tables of diff_text and the flamegraph.
std::string diff_html(const SnapshotDiff& d, const std::string& title);

}  // namespace memsight
