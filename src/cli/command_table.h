#pragma once
// The commands of `memsight`, written once (commands.cpp): each one's name,
// usage, options (which take a value, which repeat) and help text. The
// parser, the usage in its errors, `memsight --help`, `memsight COMMAND
// --help` and `memsight help COMMAND` all read them from here.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace memsight::cli {

struct Args;

// What an option takes after its name.
enum class Takes {
  Nothing,  // a flag
  Value,    // one value; given twice, the last counts
  Values,   // repeatable: every value counts, in the order given
};

struct Option {
  std::string_view name;        // "--output"
  std::string_view short_name;  // "-o", or ""
  Takes takes = Takes::Nothing;
  // The option's row in the help: its left column ("-o FILE") and its text,
  // where '\n' starts a continuation line. An option without a label is
  // accepted but not listed.
  std::string_view label = {};
  std::string_view help = {};
  // A value to show when the value is missing ("such as ..."), or "".
  std::string_view example = {};
};

// What one help page describes: the usage, options and text shared by the
// commands that page names (segments|memory; view|trace-plot|segment-plot).
struct Syntax {
  std::string_view names;  // "segments|memory", as the usage line names them
  // The ways of calling it, each after "memsight NAME"; '\n' breaks a long
  // one onto lines aligned after the name.
  std::span<const std::string_view> forms;
  std::string_view about;  // the paragraphs after the usage
  std::span<const Option> options;
  size_t column = 0;            // width of the options' left column
  std::string_view after = {};  // what follows the options
};

// A row of the list of commands in `memsight --help`.
struct Listing {
  std::string_view synopsis;  // "stats SNAP"
  std::string_view text;      // '\n' starts a continuation line
};

// Where `memsight --help` lists a command.
enum class Group { Torch, Beyond };

struct Command {
  std::string_view name;
  Group group;
  std::span<const Listing> listing;
  const Syntax* syntax;
  int (*run)(const Args& args);
};

// Every command, in the order `memsight --help` lists them.
std::span<const Command> commands();
// The command called `name`, or nullptr.
const Command* find_command(std::string_view name);
// The options every command takes (--max-expanded).
std::span<const Option> common_options();

// `memsight --help`.
std::string overview_help();
// `memsight COMMAND --help`.
std::string command_help(const Command& c);
// The command's usage on one line, for errors: "memsight stats SNAPSHOT
// [-o FILE]", its forms joined by " | ".
std::string usage_line(const Command& c);

}  // namespace memsight::cli
