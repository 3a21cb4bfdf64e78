// memsight: GPU memory snapshots explained. Finds the command in the table
// (commands.cpp), reads its arguments and runs it; every user error is one
// line on stderr and exit status 2. Shared by the executable and the Python
// module (`python -m memsight`).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/command_table.h"
#include "memsight/cli.h"
#include "memsight/error.h"
#include "memsight/io.h"
#include "memsight/reader.h"
#include "util/version.h"

namespace {

// Help text to standard output: 0, or 2 with one line if it cannot be written.
int print_help(const std::string& text) {
  try {
    memsight::cli::write_stdout(text);
    return 0;
  } catch (const memsight::cli::ClosedPipe&) {
    return memsight::cli::kClosedPipeStatus;
  } catch (const memsight::Error& e) {
    std::fprintf(stderr, "memsight: %s\n", e.what());
    return 2;
  }
}

int unknown_command(const std::string& name) {
  std::fprintf(stderr, "memsight: unknown command '%s' (run `memsight --help`)\n", name.c_str());
  return 2;
}

// Reads the arguments with the command's options and runs it.
int run(const memsight::cli::Command& c, const std::vector<std::string>& argv) {
  using namespace memsight::cli;
  Args a = parse_args(std::string(c.name), argv, c.syntax->options, common_options());
  for (const std::string& size : a.all("--max-expanded"))
    memsight::set_max_expanded(parse_size("--max-expanded", size));
  memsight::set_replace_read_only(a.has("--force"));
  int rc = c.run(a);
  write_stdout("");  // whatever went to standard output must have reached it
  return rc;
}

}  // namespace

int memsight::cli_main(const std::vector<std::string>& args) {
  using namespace memsight::cli;
  if (args.empty()) {
    std::fputs(overview_help().c_str(), stderr);
    return 2;
  }
  const std::string& first = args[0];
  auto asks_help = [](const std::string& a) { return a == "-h" || a == "--help"; };
  if (asks_help(first) || (first == "help" && (args.size() == 1 || asks_help(args[1]))))
    return print_help(overview_help());
  if (first == "help") {  // help COMMAND
    const Command* c = find_command(args[1]);
    return c ? print_help(command_help(*c)) : unknown_command(args[1]);
  }
  if (first == "-V" || first == "--version") return print_help(std::string(named_version()) + "\n");
  const Command* c = find_command(first);
  if (!c) return unknown_command(first);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const auto& a : rest)
    if (asks_help(a)) return print_help(command_help(*c));
  // Restores the default expansion limit and --force when the command ends:
  // the Python module runs commands in-process, one after another.
  struct SettingsScope {
    ~SettingsScope() {
      memsight::set_max_expanded(0);
      memsight::set_replace_read_only(false);
    }
  } settings_scope;
  try {
    return run(*c, rest);
  } catch (const ClosedPipe&) {
    return kClosedPipeStatus;
  } catch (const memsight::Error& e) {
    std::fprintf(stderr, "memsight %s: %s\n", first.c_str(), e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "memsight %s: out of memory\n", first.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memsight %s: internal error: %s\n", first.c_str(), e.what());
    return 1;
  }
}
