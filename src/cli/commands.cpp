// The table of memsight's commands: for each, how it is called, what it
// takes and what its help says (command_table.h). Adding a command or an
// option means adding it here and nowhere else.
#include <algorithm>

#include "cli/cli.h"
#include "cli/command_table.h"

namespace memsight::cli {
namespace {

using sv = std::string_view;

// Options several commands share, with their usual help row.
constexpr Option kJson{"--json", "", Takes::Nothing};
constexpr Option kOutput{"--output", "-o", Takes::Value};
constexpr Option kUserCode{"--user-code", "", Takes::Value, "--user-code PATS",
                           "what counts as your code (as for `summary`)"};

// stats, trace: torch's text.
constexpr sv kSnapshotForms[] = {"SNAPSHOT [-o FILE]"};
constexpr Option kOutputOnly[] = {kOutput};
constexpr Syntax kStats{"stats", kSnapshotForms,
                        "Prints torch's segment summary: one line per segment of at least 20 MiB\n"
                        "with a page map, then totals of reserved, allocated and free memory.\n",
                        kOutputOnly};
constexpr Syntax kTrace{"trace", kSnapshotForms,
                        "Prints the recorded allocator events of each device as pseudo-Python,\n"
                        "exactly as `python -m torch.cuda._memory_viz trace` does.\n",
                        kOutputOnly};

constexpr Option kFlamegraphOptions[] = {
    {"--output", "-o", Takes::Value, "-o FILE",
     ".svg: interactive flamegraph (default output.svg);\n"
     ".folded/.txt or -: folded stacks, byte-identical to torch's"}};
constexpr Syntax kFlamegraph{
    "segments|memory", kSnapshotForms,
    "Writes a flamegraph of the snapshot's blocks: `segments` groups by stream\n"
    "and segment, `memory` by stream only, then by allocation stack.\n",
    kFlamegraphOptions, 10};

constexpr sv kCompareForms[] = {"BEFORE AFTER [-o FILE]"};
constexpr Syntax kCompare{"compare", kCompareForms,
                          "Prints the addresses of segments only in BEFORE and only in AFTER, and\n"
                          "writes their blocks as a flamegraph (-o as for `segments`).\n",
                          kOutputOnly};

constexpr sv kSummaryForms[] = {
    "SNAPSHOT [--json] [--frames user|all]\n[--user-code PATTERN[,PATTERN...]] [-o FILE]"};
constexpr Option kSummaryOptions[] = {
    {"--json", "", Takes::Nothing, "--json",
     "machine-readable output (every frame with its kind);\n-o NAME.json writes it too"},
    {"--frames", "", Takes::Value, "--frames all",
     "also print every frame of each stack, with its kind"},
    {"--user-code", "", Takes::Value, "--user-code PATS",
     "comma-separated filename substrings that count as\n"
     "your code (e.g. torch/nn/ when debugging torch);\n"
     "!PAT takes matching files out of it"},
    kOutput,
};
constexpr Syntax kSummary{
    "summary", kSummaryForms,
    "Per device: peak allocated, active and reserved memory and when they\n"
    "happened (torch's own counters: max_memory_allocated, active_bytes,\n"
    "max_memory_reserved, replayed block by block), the allocation sites live\n"
    "at the peak, what kind of memory was allocated (parameters, gradients,\n"
    "optimizer state, activations, ...: tagged by memsight.torch or inferred)\n"
    "at the peak, the snapshot and each OOM, by module, memory allocated\n"
    "before recording began, fragmentation,\n"
    "whether the history is complete, and for every out-of-memory event its\n"
    "cause (fragmentation, a memory limit, other processes, true demand) and\n"
    "what to change. Events are trace entry indices, as `memsight trace` and\n"
    "the page number them.\n\n"
    "A site is the innermost frame of your own code (not torch, the standard\n"
    "library or installed packages); stacks show your frames first and count\n"
    "the hidden ones.\n",
    kSummaryOptions, 20};

constexpr sv kDiffForms[] = {"BEFORE AFTER [options]",
                             "SNAPSHOT --at MOMENT [--at MOMENT] [options]"};
constexpr Option kDiffOptions[] = {
    {"--at", "", Takes::Values, "--at MOMENT",
     "peak, snapshot (the end), oom, oom:K, step:N or a trace\n"
     "entry index (the state after it; -1: before the first).\n"
     "The first --at is BEFORE's moment, a second AFTER's; with\n"
     "one snapshot AFTER defaults to its end, with two one --at\n"
     "is both snapshots' moment"},
    {"--at-step", "", Takes::Values, "--at-step N",
     "the start of step N (as `memsight leaks` finds the steps:\n"
     "mark_step, profiler or optimizer steps, a repeating\n"
     "pattern); same as --at step:N"},
    {"--device", "", Takes::Value, "--device D[,E]",
     "the device of both (or BEFORE's D and AFTER's E); default:\n"
     "each file's first device with a trace"},
    {"--allow-mismatch", "", Takes::Nothing, "--allow-mismatch",
     "compare snapshots of different devices, or of different\n"
     "ranks (a rank is read from names like rank3_*.pickle),\n"
     "which are refused otherwise"},
    {"--json", "", Takes::Nothing, "--json", "machine-readable output (or -o NAME.json)"},
    {"--output", "-o", Takes::Value, "-o FILE",
     ".txt, .json, .svg (a flamegraph of the difference:\n"
     "growth red, shrinkage blue), .html (a page with the\n"
     "tables and that flamegraph), .folded (its stacks)"},
    kUserCode,
};
constexpr Syntax kDiff{
    "diff", kDiffForms,
    "What changed between two snapshots (each at its end), or two moments of\n"
    "one: allocated, active, reserved and cached free memory and fragmentation\n"
    "before and after (torch's counters, replayed); live memory by kind\n"
    "(parameters, gradients, optimizer state, activations, ...), by module and\n"
    "by allocation site (the innermost frame of your code), the sites that grew,\n"
    "shrank, appeared and vanished, largest change first; the sites' changes add\n"
    "up to the change in allocated memory.\n",
    kDiffOptions, 18};

constexpr sv kLeaksForms[] = {"SNAPSHOT [--json] [--user-code PATS] [-o FILE]"};
constexpr Option kLeaksOptions[] = {
    {"--json", "", Takes::Nothing, "--json",
     "machine-readable output (or -o NAME.json), with live\n"
     "memory per site at the start of each iteration"},
    kUserCode,
    kOutput,
};
constexpr Syntax kLeaks{
    "leaks", kLeaksForms,
    "Finds the iterations of the recorded loop (memsight.torch.mark_step(),\n"
    "torch.profiler's ProfilerStep#N, torch's Optimizer.step annotations, else\n"
    "an allocation that recurs at a steady interval) and reports the allocation\n"
    "sites whose memory outlives its iteration in every part of the run: bytes\n"
    "per iteration, in how many iterations, the allocations still live with\n"
    "their stacks and kind, where they were allocated and what to look for.\n"
    "Memory made once and kept (weights, optimizer state, a cache that fills\n"
    "up and stays) is not a leak. It needs at least 5 complete iterations and\n"
    "says so when there are fewer.\n"
    "Devices whose reports are alike are reported once, as in `summary`\n"
    "(\"Devices 0-7 (8 alike)\"; in the JSON \"alike\": [[0, 7]]).\n",
    kLeaksOptions, 18};

constexpr sv kWhatifForms[] = {
    "SNAPSHOT [--set KEY:VALUE ...] [--device-memory SIZE]\n[--memory-fraction F] [--json] [-o "
    "FILE]"};
constexpr Option kWhatifOptions[] = {
    {"--set", "", Takes::Values, "--set KEY:VALUE",
     "settings over the recorded ones, as PYTORCH_CUDA_ALLOC_CONF\n"
     "takes them (expandable_segments:True, max_split_size_mb:N,\n"
     "max_non_split_rounding_mb:N, garbage_collection_threshold:F,\n"
     "roundup_power2_divisions:N or [MiB:N,...,>:N]), plus\n"
     "per_process_memory_fraction:F\n"
     "(torch.cuda.set_per_process_memory_fraction) and\n"
     "defaults (torch's defaults first); repeatable.\n"
     "Without --set: a table of standard alternatives by peak\n"
     "reserved, simulated on all cores.",
     "expandable_segments:True"},
    {"--device-memory", "", Takes::Value, "--device-memory SIZE",
     "the device's memory (torch.cuda.mem_get_info()[1]), e.g.\n"
     "80G; by default what the recording says (an OOM's free\n"
     "memory, memsight's OOM observer), else no bound"},
    {"--memory-fraction", "", Takes::Value, "--memory-fraction F",
     "the fraction the recorded job passed to\n"
     "torch.cuda.set_per_process_memory_fraction (snapshots do\n"
     "not record it): every simulation's cap; by default one\n"
     "inferred from a recorded OOM under a cap"},
    {"--json", "", Takes::Nothing, "--json", "machine-readable output (or -o NAME.json)"},
    {"--output", "-o", Takes::Value, "-o FILE", ".txt or .json (default: standard output)"},
};
constexpr Syntax kWhatif{
    "whatif", kWhatifForms,
    "Runs each device's recorded requests (allocations and their sizes and streams,\n"
    "frees, record_stream's delayed frees, empty_cache calls, CUDA graphs' private\n"
    "pools) through a simulation of torch's CUDA caching allocator under other\n"
    "settings, and reports peak reserved memory, what of it sat unused at the peak,\n"
    "and whether the recorded out-of-memory error still happens or a new one would.\n"
    "First it checks itself: under the recorded settings the simulation must make\n"
    "every recorded segment event and reach torch's reserved peak; where it does\n"
    "not, it says so and by how much.\n",
    kWhatifOptions, 21};

constexpr sv kEstimateForms[] = {
    "SNAPSHOT -o OUT.pickle [--set KEY:VALUE ...]\n[--device-memory SIZE] [--memory-fraction F] "
    "[--json]"};
constexpr Option kEstimateOptions[] = {
    {"--output", "-o", Takes::Value, "-o OUT.pickle",
     "where to write the completed snapshot (.gz/.zst/.xz\n"
     "names compress); required"},
    {"--set", "", Takes::Values, "--set KEY:VALUE",
     "allocator settings, as PYTORCH_CUDA_ALLOC_CONF takes them\n"
     "(as for whatif), plus per_process_memory_fraction:F;\n"
     "repeatable; default: torch's defaults",
     "expandable_segments:True"},
    {"--device-memory", "", Takes::Value, "--device-memory SIZE",
     "the device's memory, e.g. 80G: the job runs out where\n"
     "reserved memory would pass it; default: no bound"},
    {"--memory-fraction", "", Takes::Value, "--memory-fraction F",
     "torch.cuda.set_per_process_memory_fraction's cap, a share\n"
     "of --device-memory"},
    {"--json", "", Takes::Nothing, "--json", "print the answer as JSON"},
};
constexpr Syntax kEstimate{
    "estimate", kEstimateForms,
    "Completes an estimate: a requests-only snapshot (the allocations and frees of a\n"
    "training step run without a GPU, as memsight.torch.estimate writes it: no\n"
    "segments, no segment events) goes through the simulation of torch's CUDA\n"
    "caching allocator under the settings given. It writes the completed snapshot\n"
    "(the segment events the allocator would take, each block at its address, the\n"
    "segments as the run ends, torch's oom entry where it runs out of memory), which\n"
    "summary, view, diff and whatif read as a recording, and prints the answer: peak\n"
    "allocated and reserved memory, what of it sits unused at the peak, whether it\n"
    "fits the device or where it runs out, and the what-if table of the standard\n"
    "settings over the same requests. A recording is refused: it is complete.\n",
    kEstimateOptions, 24};

constexpr sv kViewForms[] = {"SNAPSHOT [-o FILE] [--view NAME] [--device N]"};
constexpr Option kViewOptions[] = {
    kOutput,
    {"--view", "", Takes::Value, "--view NAME",
     "first view: overview, timeline, segments-timeline, state,\n"
     "pools, flamegraph, settings, leaks (trace-plot: timeline;\n"
     "segment-plot: state)"},
    {"--device", "-d", Takes::Value, "--device N",
     "the device the page opens on (default: the one with\n"
     "the most trace entries); a page holds at most 64\n"
     "devices, and always this one"},
    {"--user-code", "", Takes::Value, "--user-code PATS",
     "what counts as your code, as for `summary` (the page\n"
     "can change it too)"},
};
constexpr Syntax kView{"view|trace-plot|segment-plot", kViewForms,
                       "Writes one self-contained HTML file (no network needed) with the memory\n"
                       "timeline, segment timeline, allocator state history, flamegraphs and a\n"
                       "summary. Default output: the snapshot name with .html.\n",
                       kViewOptions, 14};

constexpr sv kViewerForms[] = {"[-o FILE]"};
constexpr Syntax kViewer{
    "viewer", kViewerForms,
    "Writes the standalone viewer (default memsight-viewer.html): one self-contained\n"
    "page, no server or network needed, that opens PyTorch memory snapshots\n"
    "(.pickle, .gz, .zst, .xz) dropped on it or picked with its file chooser, and\n"
    "shows the same views and summary as `memsight view`. memsight's engine runs\n"
    "inside it, compiled to WebAssembly: the file is read on the computer that\n"
    "opens the page, in pieces, with the same safe reader as this command (no code\n"
    "from the file runs). Host it as a static file anywhere.\n",
    kOutputOnly};

constexpr sv kProfileForms[] = {"TRACE.json[.gz] [--json] [--user-code PATS] [-o FILE]",
                                "--timeline TIMELINE.json[.gz] -o timeline.html"};
constexpr Option kProfileOptions[] = {
    {"--json", "", Takes::Nothing, "--json",
     "machine-readable (or -o NAME.json): {\"steps\": [{\"step\": N,\n"
     "\"devices\": {\"cuda:0\": {\"peak_allocated\": B, ...}}, ...}]}"},
    {"--output", "-o", Takes::Value, "-o FILE.html",
     "a self-contained page: memory curves per device with the\nsteps marked, and the tables"},
    kUserCode,
    {"--timeline", "", Takes::Nothing, "--timeline",
     "read export_memory_timeline's output (.json, .json.gz or\n"
     ".raw.json.gz) and write an interactive page of memory by\n"
     "category (parameter, optimizer state, input, temporary,\n"
     "activation, gradient, autograd detail, unknown)"},
};
constexpr Syntax kProfile{
    "profile",
    kProfileForms,
    "Reads a torch.profiler Chrome trace (export_chrome_trace, or the files\n"
    "tensorboard_trace_handler and memsight's TorchProfiler write) as a stream,\n"
    "never as a whole document, and reports per profiler step (ProfilerStep#N):\n"
    "peak allocated and reserved memory per device (from profile_memory's\n"
    "[memory] events), allocation and free counts and bytes, what was live at\n"
    "the peak and what allocated most (by op, with the line of your code that\n"
    "called it when the trace has Python stacks), and the ops and kernels that\n"
    "took the most time.\n",
    kProfileOptions,
    16,
    "A FIFO with no writer blocks, as with cat.\n"};

constexpr sv kRanksForms[] = {
    "SNAPSHOT|DIR|PATTERN|MANIFEST... [--json] [-o FILE]\n"
    "[--pages notable|all|none] [--jobs N] [--allow-absolute] [--user-code PATS]"};
constexpr Option kRanksOptions[] = {
    {"--json", "", Takes::Nothing, "--json", "machine-readable (or -o NAME.json)"},
    {"--output", "-o", Takes::Value, "-o NAME.html",
     "a self-contained page: a chart of every rank, the OOMs,\n"
     "the ranks that differ, a table, each rank's details"},
    {"--pages", "", Takes::Value, "--pages WHICH",
     "with -o NAME.html, also write NAME.ranks/rankN.html, the\n"
     "full page of a rank, linked from the report: notable\n"
     "(default: the OOMed, typical and differing ranks, at\n"
     "most 16), all, or none"},
    {"--jobs", "-j", Takes::Value, "--jobs N", "files read at once (default: up to 4)"},
    {"--allow-absolute", "", Takes::Nothing, "--allow-absolute",
     "read a manifest's absolute paths where they point\n"
     "(default: only in or beside the manifest's folder)"},
    kUserCode,
};
constexpr Syntax kRanks{
    "ranks", kRanksForms,
    "Reads the snapshots of a distributed job's ranks (one file per rank, e.g.\n"
    "memsight.torch.dump_all_ranks or OOMObserver's coordinated dumps) and\n"
    "reports them side by side: per rank the peak allocated, active and reserved\n"
    "memory and when, the state at the dump, fragmentation, what kind of memory,\n"
    "and each OOM with its diagnosis; the median rank, the ranks that differ from\n"
    "it and by what (kind, module, allocation site), whether an OOMed rank was\n"
    "different or only the one that failed, and what does not match (torch\n"
    "versions, devices, dump rounds, missing ranks), never fatal.\n\n"
    "An input is a snapshot, a directory (its *.pickle and *.pkl files,\n"
    "compressed or not), a glob pattern in quotes (\"run/oom_3_rank*.pickle\") or\n"
    "a dump round's manifest (*_manifest.json), whose relative paths stay inside\n"
    "its folder and whose absolute ones are read beside it. A link in a\n"
    "directory that leads nowhere is skipped with a note. The rank of a file is\n"
    "the one memsight.torch wrote into it, else the number after \"rank\" in its\n"
    "name, else its place among the inputs. Files are read a few at a time, each\n"
    "summarised and dropped: memory holds a few snapshots, not all of them.\n",
    kRanksOptions, 20};

constexpr sv kConvertForms[] = {"SNAPSHOT -o OUT"};
constexpr Syntax kConvert{
    "convert", kConvertForms,
    "Reads a snapshot and writes it back as a pickle that torch and pickle.load\n"
    "read; OUT ending in .gz, .zst or .xz is compressed. Another compression\n"
    "suffix (.bz2, .lz4, ...) or a name of another format (.json, .html) is\n"
    "refused before the snapshot is read.\n",
    kOutputOnly};

// The rows of `memsight --help`.
constexpr Listing kStatsRow[] = {{"stats SNAP", "segment summary with page maps (torch: stats)"}};
constexpr Listing kTraceRow[] = {{"trace SNAP", "the allocation event log (torch: trace)"}};
constexpr Listing kSegmentsRow[] = {
    {"segments SNAP [-o FILE]", "flamegraph of reserved memory by segment"}};
constexpr Listing kMemoryRow[] = {
    {"memory SNAP [-o FILE]", "flamegraph of allocated memory by stack"}};
constexpr Listing kCompareRow[] = {
    {"compare BEFORE AFTER [-o FILE]", "segments present in only one of two snapshots"}};
constexpr Listing kSummaryRow[] = {{"summary SNAP [--json]",
                                    "torch's peak counters, allocation sites in your\n"
                                    "code, what kind of memory by module, fragmentation,\n"
                                    "out-of-memory causes and fixes"}};
constexpr Listing kDiffRow[] = {{"diff BEFORE AFTER [-o FILE]",
                                 "what changed: live memory by site, kind and module,\n"
                                 "reserved and free memory; --at/--at-step compare\n"
                                 "two moments of one snapshot"}};
constexpr Listing kLeaksRow[] = {{"leaks SNAP [--json]",
                                  "memory that grows from iteration to iteration:\n"
                                  "the sites, bytes per iteration, where allocated"}};
constexpr Listing kWhatifRow[] = {{"whatif SNAP [--set KEY:VALUE]",
                                   "the recorded requests through torch's allocator,\n"
                                   "simulated under other settings: peak reserved,\n"
                                   "fragmentation, whether the OOM still happens"}};
constexpr Listing kEstimateRow[] = {{"estimate SNAP -o OUT [--set KEY:VALUE]",
                                     "a requests-only estimate through torch's allocator,\n"
                                     "simulated: peaks, fragmentation, fits or OOM, and\n"
                                     "the completed snapshot"}};
constexpr Listing kViewRow[] = {
    {"view SNAP [-o FILE]", "self-contained interactive HTML report (offline)"}};
constexpr Listing kTracePlotRow[] = {
    {"trace-plot SNAP [-o FILE]", "the report, opened on the memory timeline"}};
constexpr Listing kSegmentPlotRow[] = {
    {"segment-plot SNAP [-o FILE]", "the report, opened on the allocator state history"}};
constexpr Listing kViewerRow[] = {{"viewer [-o FILE]",
                                   "a standalone page that opens any snapshot dropped\n"
                                   "on it, offline (the engine runs in the browser)"}};
constexpr Listing kConvertRow[] = {
    {"convert SNAP -o OUT", "rewrite a snapshot (.gz/.zst/.xz names compress)"}};
constexpr Listing kRanksRow[] = {{"ranks SNAP... [--json] [-o report.html]",
                                  "many ranks' snapshots side by side: peaks, kinds,\n"
                                  "OOMs, the ranks that differ from the median"}};
constexpr Listing kProfileRows[] = {{"profile TRACE [--json] [-o report.html]",
                                     "torch.profiler Chrome trace: memory and time per step"},
                                    {"profile --timeline TIMELINE -o timeline.html",
                                     "torch's categorised memory timeline, interactive"}};

constexpr Command kCommands[] = {
    {"stats", Group::Torch, kStatsRow, &kStats, cmd_text},
    {"trace", Group::Torch, kTraceRow, &kTrace, cmd_text},
    {"segments", Group::Torch, kSegmentsRow, &kFlamegraph, cmd_text},
    {"memory", Group::Torch, kMemoryRow, &kFlamegraph, cmd_text},
    {"compare", Group::Torch, kCompareRow, &kCompare, cmd_compare},
    {"summary", Group::Beyond, kSummaryRow, &kSummary, cmd_summary},
    {"diff", Group::Beyond, kDiffRow, &kDiff, cmd_diff},
    {"leaks", Group::Beyond, kLeaksRow, &kLeaks, cmd_leaks},
    {"whatif", Group::Beyond, kWhatifRow, &kWhatif, cmd_whatif},
    {"estimate", Group::Beyond, kEstimateRow, &kEstimate, cmd_estimate},
    {"view", Group::Beyond, kViewRow, &kView, cmd_view},
    {"trace-plot", Group::Beyond, kTracePlotRow, &kView, cmd_view},
    {"segment-plot", Group::Beyond, kSegmentPlotRow, &kView, cmd_view},
    {"viewer", Group::Beyond, kViewerRow, &kViewer, cmd_viewer},
    {"convert", Group::Beyond, kConvertRow, &kConvert, cmd_convert},
    {"ranks", Group::Beyond, kRanksRow, &kRanks, cmd_ranks},
    {"profile", Group::Beyond, kProfileRows, &kProfile, cmd_profile},
};

constexpr Option kCommonOptions[] = {
    {"--force", "", Takes::Nothing, "--force",
     "replace an output file that is read-only (a file's\n"
     "permissions carry over to the one that replaces it)"},
    {"--max-expanded", "", Takes::Value, "--max-expanded SIZE",
     "the most bytes a compressed snapshot may expand\n"
     "to (8G, 512M, ...). Default: 100 times the\n"
     "compressed file's size (on a pipe, of the bytes\n"
     "read so far) plus 64 MiB, at most 32 GiB; past\n"
     "it the read stops with an error."},
};

}  // namespace

std::span<const Command> commands() { return kCommands; }

const Command* find_command(std::string_view name) {
  auto it = std::find_if(std::begin(kCommands), std::end(kCommands),
                         [&](const Command& c) { return c.name == name; });
  return it == std::end(kCommands) ? nullptr : &*it;
}

std::span<const Option> common_options() { return kCommonOptions; }

}  // namespace memsight::cli
