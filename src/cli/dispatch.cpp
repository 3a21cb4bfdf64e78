// memsight: GPU memory snapshots explained. Dispatches to one subcommand;
// every user error is one line on stderr and exit status 2. Shared by the
// executable and the Python module (`python -m memsight`).
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "memsight/cli.h"
#include "memsight/error.h"
#include "memsight/reader.h"

namespace {

constexpr const char* kUsage = R"(memsight - GPU memory snapshots explained

usage: memsight COMMAND [options] SNAPSHOT...

SNAPSHOT is a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot),
plain or compressed with gzip, zstd or xz; "-" reads standard input. Reading
never runs code from the file.

Commands compatible with `python -m torch.cuda._memory_viz` (same text):
  stats SNAP                 segment summary with page maps (torch: stats)
  trace SNAP                 the allocation event log (torch: trace)
  segments SNAP [-o FILE]    flamegraph of reserved memory by segment
  memory SNAP [-o FILE]      flamegraph of allocated memory by stack
  compare BEFORE AFTER [-o FILE]
                             segments present in only one of two snapshots
    (-o: .svg writes an interactive flamegraph (default output.svg),
     .folded/.txt or "-" the folded stacks)

Beyond torch:
  summary SNAP [--json]      torch's peak counters, allocation sites in your
                             code, what kind of memory by module, fragmentation,
                             out-of-memory causes and fixes
  diff BEFORE AFTER [-o FILE]
                             what changed: live memory by site, kind and module,
                             reserved and free memory; --at/--at-step compare
                             two moments of one snapshot
  leaks SNAP [--json]        memory that grows from iteration to iteration:
                             the sites, bytes per iteration, the line to fix
  whatif SNAP [--set KEY:VALUE]
                             the recorded requests through torch's allocator,
                             simulated under other settings: peak reserved,
                             fragmentation, whether the OOM still happens
  view SNAP [-o FILE]        self-contained interactive HTML report (offline)
  trace-plot SNAP [-o FILE]  the report, opened on the memory timeline
  segment-plot SNAP [-o FILE]
                             the report, opened on the allocator state history
  viewer [-o FILE]           a standalone page that opens any snapshot dropped
                             on it, offline (the engine runs in the browser)
  convert SNAP -o OUT        rewrite a snapshot (.gz/.zst/.xz names compress)
  ranks SNAP... [--json] [-o report.html]
                             many ranks' snapshots side by side: peaks, kinds,
                             OOMs, the ranks that differ from the median
  profile TRACE [--json] [-o report.html]
                             torch.profiler Chrome trace: memory and time per step
  profile --timeline TIMELINE -o timeline.html
                             torch's categorised memory timeline, interactive

Options of every command that reads a snapshot:
  --max-expanded SIZE        the most bytes a compressed snapshot may expand
                             to (8G, 512M, ...). Default: 100 times the
                             compressed file's size (on a pipe, of the bytes
                             read so far) plus 64 MiB, at most 32 GiB; past
                             it the read stops with an error.

A file given to the wrong command is named with the command that reads it
(a profiler trace to `summary`, a snapshot to `profile`). An output's format
follows its name (-o x.json: JSON, -o x.html: a page, -o x.svg: SVG); a name
asking for a format the command does not write is refused before anything is
read or written.

Memory stays proportional to the input: a length or count declared inside
a file never reserves more than the bytes behind it. A FIFO or a terminal
given as SNAPSHOT is read until its writer closes it, as `cat` would.

Run `memsight COMMAND --help` for a command's options.
)";

const char* command_help(const std::string& c) {
  if (c == "stats")
    return "usage: memsight stats SNAPSHOT [-o FILE]\n\n"
           "Prints torch's segment summary: one line per segment of at least 20 MiB\n"
           "with a page map, then totals of reserved, allocated and free memory.\n";
  if (c == "trace")
    return "usage: memsight trace SNAPSHOT [-o FILE]\n\n"
           "Prints the recorded allocator events of each device as pseudo-Python,\n"
           "exactly as `python -m torch.cuda._memory_viz trace` does.\n";
  if (c == "segments" || c == "memory")
    return "usage: memsight segments|memory SNAPSHOT [-o FILE]\n\n"
           "Writes a flamegraph of the snapshot's blocks: `segments` groups by stream\n"
           "and segment, `memory` by stream only, then by allocation stack.\n"
           "  -o FILE   .svg: interactive flamegraph (default output.svg);\n"
           "            .folded/.txt or -: folded stacks, byte-identical to torch's\n";
  if (c == "compare")
    return "usage: memsight compare BEFORE AFTER [-o FILE]\n\n"
           "Prints the addresses of segments only in BEFORE and only in AFTER, and\n"
           "writes their blocks as a flamegraph (-o as for `segments`).\n";
  if (c == "summary")
    return "usage: memsight summary SNAPSHOT [--json] [--frames user|all]\n"
           "                        [--user-code PATTERN[,PATTERN...]] [-o FILE]\n\n"
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
           "the hidden ones.\n"
           "  --json              machine-readable output (every frame with its kind);\n"
           "                      -o NAME.json writes it too\n"
           "  --frames all        also print every frame of each stack, with its kind\n"
           "  --user-code PATS    comma-separated filename substrings that count as\n"
           "                      your code (e.g. torch/nn/ when debugging torch);\n"
           "                      !PAT takes matching files out of it\n";
  if (c == "diff")
    return "usage: memsight diff BEFORE AFTER [options]\n"
           "       memsight diff SNAPSHOT --at MOMENT [--at MOMENT] [options]\n\n"
           "What changed between two snapshots (each at its end), or two moments of\n"
           "one: allocated, active, reserved and cached free memory and fragmentation\n"
           "before and after (torch's counters, replayed); live memory by kind\n"
           "(parameters, gradients, optimizer state, activations, ...), by module and\n"
           "by allocation site (the innermost frame of your code), the sites that grew,\n"
           "shrank, appeared and vanished, largest change first; the sites' changes add\n"
           "up to the change in allocated memory.\n"
           "  --at MOMENT       peak, snapshot (the end), oom, oom:K, step:N or a trace\n"
           "                    entry index (the state after it; -1: before the first).\n"
           "                    The first --at is BEFORE's moment, a second AFTER's; with\n"
           "                    one snapshot AFTER defaults to its end, with two one --at\n"
           "                    is both snapshots' moment\n"
           "  --at-step N       the start of step N (as `memsight leaks` finds the steps:\n"
           "                    mark_step, profiler or optimizer steps, a repeating\n"
           "                    pattern); same as --at step:N\n"
           "  --device D[,E]    the device of both (or BEFORE's D and AFTER's E); default:\n"
           "                    each file's first device with a trace\n"
           "  --allow-mismatch  compare snapshots of different devices, or of different\n"
           "                    ranks (a rank is read from names like rank3_*.pickle),\n"
           "                    which are refused otherwise\n"
           "  --json            machine-readable output (or -o NAME.json)\n"
           "  -o FILE           .txt, .json, .svg (a flamegraph of the difference:\n"
           "                    growth red, shrinkage blue), .html (a page with the\n"
           "                    tables and that flamegraph), .folded (its stacks)\n"
           "  --user-code PATS  what counts as your code (as for `summary`)\n";
  if (c == "leaks")
    return "usage: memsight leaks SNAPSHOT [--json] [--user-code PATS] [-o FILE]\n\n"
           "Finds the iterations of the recorded loop (memsight.torch.mark_step(),\n"
           "torch.profiler's ProfilerStep#N, torch's Optimizer.step annotations, else\n"
           "an allocation that recurs at a steady interval) and reports the allocation\n"
           "sites whose memory outlives its iteration in every part of the run: bytes\n"
           "per iteration, in how many iterations, the allocations still live with\n"
           "their stacks and kind, and the line to fix. Memory made once and kept\n"
           "(weights, optimizer state, a cache that fills up and stays) is not a leak.\n"
           "It needs at least 5 complete iterations and says so when there are fewer.\n"
           "Devices whose reports are alike are reported once, as in `summary`\n"
           "(\"Devices 0-7 (8 alike)\"; in the JSON \"alike\": [[0, 7]]).\n"
           "  --json            machine-readable output (or -o NAME.json), with live\n"
           "                    memory per site at the start of each iteration\n"
           "  --user-code PATS  what counts as your code (as for `summary`)\n";
  if (c == "whatif")
    return "usage: memsight whatif SNAPSHOT [--set KEY:VALUE ...] [--device-memory SIZE]\n"
           "                       [--memory-fraction F] [--json] [-o FILE]\n\n"
           "Runs each device's recorded requests (allocations and their sizes and streams,\n"
           "frees, record_stream's delayed frees, empty_cache calls, CUDA graphs' private\n"
           "pools) through a simulation of torch's CUDA caching allocator under other\n"
           "settings, and reports peak reserved memory, what of it sat unused at the peak,\n"
           "and whether the recorded out-of-memory error still happens or a new one would.\n"
           "First it checks itself: under the recorded settings the simulation must make\n"
           "every recorded segment event and reach torch's reserved peak; where it does\n"
           "not, it says so and by how much.\n"
           "  --set KEY:VALUE      settings over the recorded ones, as PYTORCH_CUDA_ALLOC_CONF\n"
           "                       takes them (expandable_segments:True, max_split_size_mb:N,\n"
           "                       max_non_split_rounding_mb:N, garbage_collection_threshold:F,\n"
           "                       roundup_power2_divisions:N or [MiB:N,...,>:N]), plus\n"
           "                       per_process_memory_fraction:F\n"
           "                       (torch.cuda.set_per_process_memory_fraction) and\n"
           "                       defaults (torch's defaults first); repeatable.\n"
           "                       Without --set: a table of standard alternatives by peak\n"
           "                       reserved, simulated on all cores.\n"
           "  --device-memory SIZE the device's memory (torch.cuda.mem_get_info()[1]), e.g.\n"
           "                       80G; by default what the recording says (an OOM's free\n"
           "                       memory, memsight's OOM observer), else no bound\n"
           "  --memory-fraction F  the fraction the recorded job passed to\n"
           "                       torch.cuda.set_per_process_memory_fraction (snapshots do\n"
           "                       not record it): every simulation's cap; by default one\n"
           "                       inferred from a recorded OOM under a cap\n"
           "  --json               machine-readable output\n";
  if (c == "view" || c == "trace-plot" || c == "segment-plot")
    return "usage: memsight view|trace-plot|segment-plot SNAPSHOT [-o FILE] [--view NAME]\n\n"
           "Writes one self-contained HTML file (no network needed) with the memory\n"
           "timeline, segment timeline, allocator state history, flamegraphs and a\n"
           "summary. Default output: the snapshot name with .html.\n"
           "  --view NAME   first view: overview, timeline, segments-timeline, state,\n"
           "                pools, flamegraph, settings, leaks (trace-plot: timeline;\n"
           "                segment-plot: state)\n"
           "  --user-code PATS  what counts as your code, as for `summary` (the page\n"
           "                can change it too)\n";
  if (c == "viewer")
    return "usage: memsight viewer [-o FILE]\n\n"
           "Writes the standalone viewer (default memsight-viewer.html): one self-contained\n"
           "page, no server or network needed, that opens PyTorch memory snapshots\n"
           "(.pickle, .gz, .zst, .xz) dropped on it or picked with its file chooser, and\n"
           "shows the same views and summary as `memsight view`. memsight's engine runs\n"
           "inside it, compiled to WebAssembly: the file is read on the computer that\n"
           "opens the page, in pieces, with the same safe reader as this command (no code\n"
           "from the file runs). Host it as a static file anywhere.\n";
  if (c == "profile")
    return "usage: memsight profile TRACE.json[.gz] [--json] [--user-code PATS] [-o FILE]\n"
           "       memsight profile --timeline TIMELINE.json[.gz] -o timeline.html\n\n"
           "Reads a torch.profiler Chrome trace (export_chrome_trace, or the files\n"
           "tensorboard_trace_handler and memsight's TorchProfiler write) as a stream,\n"
           "never as a whole document, and reports per profiler step (ProfilerStep#N):\n"
           "peak allocated and reserved memory per device (from profile_memory's\n"
           "[memory] events), allocation and free counts and bytes, what was live at\n"
           "the peak and what allocated most (by op, with the line of your code that\n"
           "called it when the trace has Python stacks), and the ops and kernels that\n"
           "took the most time.\n"
           "  --json          machine-readable (or -o NAME.json): {\"steps\": [{\"step\": N,\n"
           "                  \"devices\": {\"cuda:0\": {\"peak_allocated\": B, ...}}, ...}]}\n"
           "  -o FILE.html    a self-contained page: memory curves per device with the\n"
           "                  steps marked, and the tables\n"
           "  --user-code PATS  what counts as your code (as for `summary`)\n"
           "  --timeline      read export_memory_timeline's output (.json, .json.gz or\n"
           "                  .raw.json.gz) and write an interactive page of memory by\n"
           "                  category (parameter, optimizer state, input, temporary,\n"
           "                  activation, gradient, autograd detail, unknown)\n"
           "A FIFO with no writer blocks, as with cat.\n";
  if (c == "ranks")
    return "usage: memsight ranks SNAPSHOT|DIR|PATTERN|MANIFEST... [--json] [-o FILE]\n"
           "                      [--pages notable|all|none] [--jobs N] [--user-code PATS]\n\n"
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
           "a dump round's manifest (*_manifest.json). The rank of a file is the one\n"
           "memsight.torch wrote into it, else the number after \"rank\" in its name,\n"
           "else its place among the inputs. Files are read a few at a time, each\n"
           "summarised and dropped: memory holds a few snapshots, not all of them.\n"
           "  --json              machine-readable (or -o NAME.json)\n"
           "  -o NAME.html        a self-contained page: a chart of every rank, the OOMs,\n"
           "                      the ranks that differ, a table, each rank's details\n"
           "  --pages WHICH       with -o NAME.html, also write NAME.ranks/rankN.html, the\n"
           "                      full page of a rank, linked from the report: notable\n"
           "                      (default: the OOMed, typical and differing ranks, at\n"
           "                      most 16), all, or none\n"
           "  --jobs N            files read at once (default: up to 4)\n"
           "  --user-code PATS    what counts as your code (as for `summary`)\n";
  if (c == "convert")
    return "usage: memsight convert SNAPSHOT -o OUT\n\n"
           "Reads a snapshot and writes it back as a pickle that torch and pickle.load\n"
           "read; OUT ending in .gz, .zst or .xz is compressed. Another compression\n"
           "suffix (.bz2, .lz4, ...) or a name of another format (.json, .html) is\n"
           "refused before the snapshot is read.\n";
  return nullptr;
}

// Takes --max-expanded SIZE (or --max-expanded=SIZE) out of a command's
// arguments and applies it.
std::vector<std::string> take_max_expanded(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    std::string value;
    if (a == "--max-expanded") {
      if (i + 1 >= args.size()) throw memsight::Error("option --max-expanded needs a value");
      value = args[++i];
    } else if (a.rfind("--max-expanded=", 0) == 0) {
      value = a.substr(std::strlen("--max-expanded="));
    } else {
      rest.push_back(a);
      continue;
    }
    memsight::set_max_expanded(memsight::cli::parse_size("--max-expanded", value));
  }
  return rest;
}

int run_command(const std::string& cmd, const std::vector<std::string>& rest) {
  using namespace memsight::cli;
  if (cmd == "stats" || cmd == "trace" || cmd == "segments" || cmd == "memory")
    return cmd_text(cmd, rest);
  if (cmd == "compare") return cmd_compare(rest);
  if (cmd == "summary") return cmd_summary(rest);
  if (cmd == "diff") return cmd_diff(rest);
  if (cmd == "leaks") return cmd_leaks(rest);
  if (cmd == "whatif") return cmd_whatif(rest);
  if (cmd == "view" || cmd == "trace-plot" || cmd == "segment-plot") return cmd_view(cmd, rest);
  if (cmd == "profile") return cmd_profile(rest);
  if (cmd == "viewer") return cmd_viewer(rest);
  if (cmd == "ranks") return cmd_ranks(rest);
  return cmd_convert(rest);
}

// Help text to standard output: 0, or 2 with one line if it cannot be written.
int print_help(const char* text) {
  try {
    memsight::cli::write_stdout(text);
    return 0;
  } catch (const memsight::Error& e) {
    std::fprintf(stderr, "memsight: %s\n", e.what());
    return 2;
  }
}

}  // namespace

int memsight::cli_main(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    if (args.empty()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    return print_help(kUsage);
  }
  if (args[0] == "--version") {
    return print_help("memsight 0.1.0\n");
  }
  std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const char* help = command_help(cmd);
  if (!help) {
    std::fprintf(stderr, "memsight: unknown command '%s' (run `memsight --help`)\n", cmd.c_str());
    return 2;
  }
  for (const auto& a : rest) {
    if (a == "-h" || a == "--help") return print_help(help);
  }
  // Restores the default expansion limit when the command ends: the Python
  // module runs commands in-process, one after another.
  struct ExpansionScope {
    ~ExpansionScope() { memsight::set_max_expanded(0); }
  } expansion_scope;
  try {
    rest = take_max_expanded(rest);
    int rc = run_command(cmd, rest);
    memsight::cli::write_stdout("");  // whatever went to standard output must have reached it
    return rc;
  } catch (const memsight::Error& e) {
    std::fprintf(stderr, "memsight %s: %s\n", cmd.c_str(), e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "memsight %s: out of memory\n", cmd.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memsight %s: internal error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
