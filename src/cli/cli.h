#pragma once
// Shared plumbing of the `memsight` subcommands: argument parsing, loading
// with progress, writing outputs by extension.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/reader.h"
#include "memsight/snapshot.h"

namespace memsight::cli {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // "--output" -> value ("" for flags)
  bool has(const std::string& name) const { return options.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
};

struct OptionSpec {
  std::string long_name;   // "--output"
  std::string short_name;  // "-o" or ""
  bool takes_value;
};

// Throws memsight::Error for unknown options or missing values.
Args parse_args(const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs);
void expect_positional(const Args& a, size_t n, const std::string& usage);

Snapshot load(const std::string& path, ReadScope scope = ReadScope::Everything);
// Writes to `path` ("-" for stdout) atomically.
void write_output(const std::string& path, const std::string& content);
// Writes to standard output and flushes; throws Error if either fails.
void write_stdout(std::string_view content);
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

int cmd_text(const std::string& name, const std::vector<std::string>& argv);
int cmd_compare(const std::vector<std::string>& argv);
int cmd_summary(const std::vector<std::string>& argv);
int cmd_diff(const std::vector<std::string>& argv);
int cmd_leaks(const std::vector<std::string>& argv);
int cmd_whatif(const std::vector<std::string>& argv);
int cmd_view(const std::string& name, const std::vector<std::string>& argv);
int cmd_viewer(const std::vector<std::string>& argv);
int cmd_convert(const std::vector<std::string>& argv);
int cmd_profile(const std::vector<std::string>& argv);
int cmd_ranks(const std::vector<std::string>& argv);

}  // namespace memsight::cli
