#pragma once
// Many ranks, one picture: the snapshots of a distributed job's ranks (one
// file per rank, typically written at the same moment by memsight.torch's
// coordinated dumps) summarised one by one and merged: per rank the peaks
// and when, the state at the dump, fragmentation, what kind of memory, the
// OOMs and their diagnosis; across ranks the median rank, the ranks that
// differ from it and by what (kind, module, allocation site), and whatever
// does not match (torch versions, devices, dump rounds, missing ranks).
//
// The merge holds per-rank summaries, never snapshots: a rank's snapshot is
// read, summarised and dropped, several at once, so memory is a few
// snapshots being read plus a few kilobytes per rank.

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memsight/categories.h"
#include "memsight/frames.h"
#include "memsight/snapshot.h"

namespace memsight {

// What memsight.torch's coordinated dumps write beside torch's keys (the
// top-level "memsight_rank" dict, docs/formats.md); -1 / "" when not given.
struct RankOrigin {
  int64_t rank = -1, world_size = -1, local_rank = -1;
  int64_t seq = -1;          // the job-wide number of the dump round
  int64_t origin_rank = -1;  // the rank that asked for it
  int64_t batch = -1, pid = -1, device_total = -1;
  double time = 0;  // unix seconds when the dump was taken
  std::string tag, reason, host, torch_version, device_name;
  std::string job;  // a job id, where the dump names one ("job")
};

struct RankSite {
  std::string site;
  int64_t bytes = 0, count = 0;
};

struct RankModule {
  std::string name;  // "" is the model itself
  int64_t bytes = 0;
};

using KindBytes = std::array<int64_t, kCategoryCount>;
using RankRange = std::pair<int64_t, int64_t>;  // ranks first..last

// A declared world size is taken from 1 to torch's largest (a C int);
// anything else is an Error naming the file that says it.
inline constexpr int64_t kMaxWorldSize = 2147483647;

struct RankOom {
  uint32_t event = 0;
  int64_t time_us = 0, requested = 0, allocated = 0, reserved = 0, device_free = 0;
  std::string pool, site, verdict, explanation;
  std::vector<std::string> causes, remedies;
  KindBytes kinds{};
};

// One rank's snapshot, summarised: its busiest device (the highest peak
// reserved), as `memsight summary` computes it.
struct RankSummary {
  std::string path;
  int64_t rank = -1;
  std::string rank_from;  // "memsight_rank", "file name" or "argument order"
  RankOrigin origin;
  int device = 0;
  size_t devices = 0;  // devices it held memory on (allocated or reserved)
  size_t entries = 0;
  int64_t first_time_us = 0, last_time_us = 0;  // the device's first and last trace entries
  int64_t peak_allocated = 0, peak_allocated_event = -1, peak_allocated_time_us = 0;
  int64_t peak_active = 0, peak_active_event = -1, peak_active_time_us = 0;
  int64_t peak_reserved = 0, peak_reserved_event = -1, peak_reserved_time_us = 0;
  // At the dump (the snapshot's blocks).
  int64_t allocated_now = 0, active_now = 0, reserved_now = 0, free_now = 0, largest_free_now = 0;
  double fragmentation = 0;
  int64_t device_total = -1, limit = -1;  // memsight_device_memory, memsight_rank
  bool exact = true;
  std::string exactness;
  KindBytes kinds_peak{}, kinds_now{};
  std::string kinds_source;  // "tagged", "inferred" or "tagged and inferred"
  // Made in each module itself (not its submodules), at the allocated peak,
  // largest first (kRankModules).
  std::vector<RankModule> modules;
  std::vector<RankSite> sites;  // live at the allocated peak, largest first (kRankSites)
  // The lists were cut: a module or site not listed may still hold bytes.
  bool modules_cut = false, sites_cut = false;
  std::vector<RankOom> ooms;
  std::string layout;  // torch's top-level keys, in order: tells snapshot formats apart
};
inline constexpr size_t kRankSites = 50;
inline constexpr size_t kRankModules = 64;

// The numbers ranks are compared on.
enum class RankMetric : uint8_t {
  PeakAllocated,
  PeakReserved,
  AllocatedNow,
  ReservedNow,
  Fragmentation
};
inline constexpr size_t kRankMetrics = 5;
std::string_view rank_metric_name(RankMetric m);  // "peak allocated", ..., "fragmentation"
std::string_view rank_metric_key(RankMetric m);   // "peak_allocated", ...
double rank_metric(const RankSummary& r, RankMetric m);

// A rank differs from the median when a byte metric is off by at least
// kDifferShare of the median and kDifferBytes, or its fragmentation by
// kDifferFragmentation with at least kDifferBytes cached free.
inline constexpr double kDifferShare = 0.05;
inline constexpr int64_t kDifferBytes = int64_t{1} << 20;
inline constexpr double kDifferFragmentation = 0.2;

struct RankPart {
  std::string kind;  // "kind", "module" or "site"
  std::string name;  // category name, module name ("" the model) or site label
  int64_t delta = 0;
};

// "by kind: activation +8.1GiB; by module: layers.23 +6.0GiB; by site: ..."
std::string rank_parts_text(const std::vector<RankPart>& by);

struct RankDelta {
  RankMetric metric = RankMetric::PeakAllocated;
  double value = 0, median = 0;
  std::vector<RankPart> by;  // what makes the difference, largest first
};

struct RankOutlier {
  int64_t rank = -1;
  std::vector<RankDelta> deltas;
};

// For each rank that ran out of memory: was it different, or just first?
struct RankOomVerdict {
  int64_t rank = -1;
  bool different = false;
  std::string text;  // one or two sentences
};

struct RanksReport {
  std::vector<RankSummary> ranks;  // by rank
  std::array<double, kRankMetrics> median{};
  KindBytes median_kinds_peak{}, median_kinds_now{};
  int64_t typical_rank = -1;  // the rank nearest the medians
  int64_t world_size = -1;    // as the dumps say, when they agree
  // Job time: times are microseconds since time_base_us, the earliest trace
  // entry of any rank, when every rank's clock is a wall clock (torch records
  // time_us since the epoch); else each rank's own first entry (job_clock false).
  bool job_clock = false;
  int64_t time_base_us = 0;
  std::vector<RankOutlier> outliers;
  std::vector<RankOomVerdict> oom_verdicts;
  std::vector<std::string> mismatches;  // torch versions, devices, rounds: named, never fatal
  std::vector<std::string> notes;
  // The ranks below world_size that no file holds, as ranges [first, last]:
  // a declared world size of 10^9 is one range, never 10^9 entries.
  std::vector<RankRange> missing;
  // What a manifest of the dump round said of ranks that wrote nothing.
  std::vector<std::pair<int64_t, std::string>> manifest_missing;
};

// Rank numbers as ranges: "0-3, 5, 7-9", "2-99,999,999".
std::string rank_ranges(std::vector<int64_t> ranks);
std::string rank_ranges(const std::vector<RankRange>& ranges);
// How many ranks the ranges hold.
int64_t rank_count(const std::vector<RankRange>& ranges);
// The ranges of 0..world_size-1 that `present` (ascending, unique) leaves out.
std::vector<RankRange> ranks_missing(int64_t world_size, const std::vector<int64_t>& present);

// One rank's summary (summarize() of its busiest device, cut to what the
// merge keeps). `path` names the file; the rank comes from the snapshot's
// memsight_rank, else from the file name ("rank3", "rank_3", "rank-3"),
// else it is left -1 for merge_ranks to number.
RankSummary summarize_rank(const Snapshot& snap, const std::string& path,
                           const UserCode& user_code = {});

// Numbers the ranks without one by argument order, checks that no rank
// appears twice (Error naming both files), and compares. `ranks` in
// argument order.
RanksReport merge_ranks(std::vector<RankSummary> ranks);

struct RanksOptions {
  UserCode user_code;
  unsigned jobs = 0;  // files read at once (0: up to 4, one per hardware thread)
  // Whether a manifest's absolute paths are read where they point when no
  // file of that name is beside it (--allow-absolute).
  bool allow_absolute = false;
  // Whether the page and rank pages replace read-only files (--force).
  bool force = false;
};

// Each input is a snapshot file, a directory (its snapshot files), a glob
// pattern ("run/oom_3_rank*.pickle", when no file has that name) or a dump
// round's manifest (*_manifest.json, memsight.torch's coordinated dumps:
// its files, and the ranks it names as missing). A directory is listed in
// sorted order; a link in it (or from a glob) that leads nowhere is skipped
// with a note naming it. A manifest's relative paths stay inside its
// folder; its absolute ones are read beside it, or, with `allow_absolute`,
// where they point when they name snapshot files. Throws Error for an input
// that names nothing, and for a file that cannot be read.
struct RankInputs {
  std::vector<std::string> files;
  std::vector<std::pair<int64_t, std::string>> manifest_missing;
  int64_t manifest_world_size = -1;
  std::vector<std::string> notes;  // links skipped
};
RankInputs expand_rank_inputs(const std::vector<std::string>& inputs, bool allow_absolute = false);
// How many of `files` to read at once: `asked`, else up to 4 (one per
// hardware thread, $MEMSIGHT_THREADS); never more than the files.
unsigned rank_jobs(size_t files, unsigned asked);

// Reads the files `jobs` at a time, summarising each and dropping its
// snapshot, and merges them.
RanksReport read_ranks(const std::vector<std::string>& inputs, const RanksOptions& opts = {});

std::string ranks_text(const RanksReport& r);
std::string ranks_json(const RanksReport& r);

// The page: a chart of every rank, the differences, the OOMs, a table, and
// each rank's details; `pages` gives, per rank (by index in r.ranks), the
// link of its full page ("" where none was written: the page shows the
// command that writes it).
struct RanksPageOptions {
  std::string title;
  std::vector<std::string> pages;
};
std::string ranks_html(const RanksReport& r, const RanksPageOptions& opts);
// Writes the page to `out` and, for the ranks `pages` names ("notable": the
// OOMed, the typical and the differing ranks, at most 16; "all"; "none"),
// each rank's full page (render_html of its snapshot, read again) as
// rankN.html in rank_pages_folder(out), linked from the page. Every file is
// written atomically; on an error none of them is left. Returns how many
// rank pages were written.
size_t write_ranks_page(const RanksReport& r, const std::string& out, const std::string& pages,
                        const RanksOptions& opts = {});
// "run/report.html" -> "run/report.ranks".
std::string rank_pages_folder(const std::string& out);

}  // namespace memsight
