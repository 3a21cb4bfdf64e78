#include "cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "cli/command_table.h"
#include "memsight/error.h"
#include "memsight/reader.h"
#include "util/text_format.h"

namespace memsight::cli {

bool Args::has(std::string_view name) const {
  return std::any_of(options.begin(), options.end(),
                     [&](const auto& o) { return o.first == name; });
}

std::string Args::get(std::string_view name, const std::string& fallback) const {
  for (auto it = options.rbegin(); it != options.rend(); ++it)
    if (it->first == name) return it->second;
  return fallback;
}

std::vector<std::string> Args::all(std::string_view name) const {
  std::vector<std::string> values;
  for (const auto& [n, v] : options)
    if (n == name) values.push_back(v);
  return values;
}

namespace {

const Option* find_option(std::string_view name, std::span<const Option> own,
                          std::span<const Option> common) {
  for (std::span<const Option> set : {own, common})
    for (const Option& o : set)
      if (name == o.name || (!o.short_name.empty() && name == o.short_name)) return &o;
  return nullptr;
}

}  // namespace

Args parse_args(std::string command, const std::vector<std::string>& argv,
                std::span<const Option> own, std::span<const Option> common) {
  Args a;
  a.command = std::move(command);
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (only_positional || s == "-" || s.empty() || s[0] != '-') {
      a.positional.push_back(s);
      continue;
    }
    if (s == "--") {
      only_positional = true;
      continue;
    }
    std::string name = s, value;
    bool inline_value = false;
    if (auto eq = s.find('='); s.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = s.substr(0, eq);
      value = s.substr(eq + 1);
      inline_value = true;
    }
    const Option* o = find_option(name, own, common);
    if (!o) throw Error("unknown option " + name + " (see --help)");
    if (o->takes != Takes::Nothing && !inline_value) {
      if (i + 1 >= argv.size())
        throw Error("option " + name + " needs a value" +
                    (o->example.empty() ? "" : " such as " + std::string(o->example)));
      value = argv[++i];
    }
    if (o->takes != Takes::Values)
      std::erase_if(a.options, [&](const auto& given) { return given.first == o->name; });
    a.options.emplace_back(o->name, value);
  }
  return a;
}

void expect_positional(const Args& a, size_t min, size_t max) {
  const Command* c = find_command(a.command);
  const std::string usage = c ? usage_line(*c) : "memsight " + a.command;
  if (a.positional.size() < min) throw Error("missing argument; usage: " + usage);
  if (a.positional.size() > max)
    throw Error("unexpected argument '" + a.positional[max] + "'; usage: " + usage);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Snapshot load(const std::string& path, ReadScope scope) {
  // Progress only where a person is watching and the wait is noticeable.
  bool tty = isatty(STDERR_FILENO);
  bool shown = false;
  Progress progress;
  if (tty) {
    progress = [&shown](uint64_t done, uint64_t total) {
      if (total < (64u << 20)) return;
      std::fprintf(stderr, "\rreading snapshot: %3d%%", static_cast<int>(done * 100 / total));
      std::fflush(stderr);
      shown = true;
    };
  }
  Snapshot s = read_snapshot_file(path, progress, scope);
  if (shown) std::fprintf(stderr, "\r\033[K");
  return s;
}

void write_stdout(std::string_view content) {
  errno = 0;
  bool ok = std::fwrite(content.data(), 1, content.size(), stdout) == content.size();
  if (!ok || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    int err = errno;
    std::clearerr(stdout);
    if (err == EPIPE) throw ClosedPipe{};
    throw Error(std::string("standard output: write failed: ") +
                (err ? std::strerror(err) : "unknown error"));
  }
}

uint64_t parse_size(const std::string& option, const std::string& text) {
  uint64_t bytes = 0;
  if (!memsight::parse_size(text, bytes))
    throw Error("option " + option + " needs a size such as 8G, got '" + text + "'");
  return bytes;
}

void write_output(const std::string& path, const std::string& content) {
  if (path == "-") {
    write_stdout(content);
    return;
  }
  write_file_atomic(path, content);
}

}  // namespace memsight::cli
