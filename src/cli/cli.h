#pragma once
// Shared plumbing of the `memsight` subcommands: argument parsing, loading
// with progress, writing outputs by extension.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memsight/reader.h"
#include "memsight/snapshot.h"

namespace memsight::cli {

struct Option;

// A command line as the command's options (command_table.h) read it.
struct Args {
  std::string command;  // the command's name as given: "trace-plot"
  std::vector<std::string> positional;
  // Options by long name ("--output"), in the order given, with their
  // values ("" for flags): once for an option that takes one value (the last
  // given), once per value for a repeatable one.
  std::vector<std::pair<std::string, std::string>> options;
  bool has(std::string_view name) const;
  std::string get(std::string_view name, const std::string& fallback = "") const;
  // Every value of a repeatable option, in order.
  std::vector<std::string> all(std::string_view name) const;
};

// `argv` (after the command's name) read with the command's options and
// those every command takes. Throws memsight::Error for unknown options or
// missing values.
Args parse_args(std::string command, const std::vector<std::string>& argv,
                std::span<const Option> own, std::span<const Option> common);
// Throws Error, with the command's usage, unless there are `min` to `max`
// positional arguments.
void expect_positional(const Args& a, size_t min, size_t max);
inline void expect_positional(const Args& a, size_t n) { expect_positional(a, n, n); }

Snapshot load(const std::string& path, ReadScope scope = ReadScope::Everything);
// Writes to `path` ("-" for stdout) atomically.
void write_output(const std::string& path, const std::string& content);
// Writes to standard output and flushes; throws Error if either fails.
void write_stdout(std::string_view content);
// Thrown by write_stdout when the reader of standard output has gone (a
// closed pipe: `memsight trace X | head`). Not an error: the command ends
// quietly with kClosedPipeStatus, as a writer killed by SIGPIPE does (the
// executable dies of SIGPIPE before it gets here; the Python module, whose
// interpreter ignores SIGPIPE, comes here).
struct ClosedPipe {};
inline constexpr int kClosedPipeStatus = 128 + 13;
// "8G", "512M", "1048576": a byte count for `option`. Throws Error.
uint64_t parse_size(const std::string& option, const std::string& text);
bool ends_with(const std::string& s, const std::string& suffix);

// The format an output file's name asks for by its extension (after a
// compression suffix): "html" (.html, .htm), "svg", "json", "text" (.txt),
// "folded", "pickle" (.pickle, .pkl); "" for standard output ("-") and for
// a name without any of these.
std::string named_format(const std::string& path);
struct OutputRules {
  const char* flag = nullptr;  // the option that chose `fallback` ("--json"), if one did
  bool compressible = false;   // .gz/.zst/.xz allowed (snapshots only)
};
// The format `command` writes to `path`: the one of `writes` its name asks
// for, or `fallback` when it asks for none. Throws Error, before anything is
// read or written, when the name asks for a format the command does not
// write (saying which command does), for a compression (only snapshots are
// compressed; an unknown compression never), or for another format than
// rules.flag chose.
std::string output_format(const std::string& command, const std::string& path,
                          std::initializer_list<std::string_view> writes, std::string_view fallback,
                          const OutputRules& rules = {});

// The commands (commands.cpp names them); each returns the exit status.
int cmd_text(const Args& a);  // stats, trace, segments, memory
int cmd_compare(const Args& a);
int cmd_summary(const Args& a);
int cmd_diff(const Args& a);
int cmd_leaks(const Args& a);
int cmd_whatif(const Args& a);
int cmd_estimate(const Args& a);
int cmd_view(const Args& a);  // view, trace-plot, segment-plot
int cmd_viewer(const Args& a);
int cmd_convert(const Args& a);
int cmd_profile(const Args& a);
int cmd_ranks(const Args& a);

}  // namespace memsight::cli
