// The help texts, laid out from the table of commands (commands.cpp).
#include <string>
#include <string_view>

#include "cli/command_table.h"

namespace memsight::cli {
namespace {

constexpr std::string_view kIntro = R"(memsight - GPU memory snapshots explained

usage: memsight COMMAND [options] SNAPSHOT...

SNAPSHOT is a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot),
plain or compressed with gzip, zstd or xz; "-" reads standard input. Reading
never runs code from the file.

)";

struct GroupText {
  Group group;
  std::string_view heading;
  std::string_view note;  // after its rows
};

constexpr GroupText kGroups[] = {
    {Group::Torch, "Commands compatible with `python -m torch.cuda._memory_viz` (same text):\n",
     "    (-o: .svg writes an interactive flamegraph (default output.svg),\n"
     "     .folded/.txt or \"-\" the folded stacks)\n"},
    {Group::Beyond, "Beyond torch:\n", ""},
};

constexpr std::string_view kCommonHeading = "Options of every command:\n";

constexpr std::string_view kOutro = R"(
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

// The overview's left column: a synopsis that leaves two spaces before it
// shares the text's first line, a longer one has a line of its own.
constexpr size_t kOverviewColumn = 27;

// `text` with every line after the first indented by `indent` spaces.
void append_lines(std::string& out, std::string_view text, size_t indent) {
  size_t start = 0;
  while (true) {
    size_t end = text.find('\n', start);
    if (start) out.append(indent, ' ');
    out += text.substr(start, end - start);
    out += '\n';
    if (end == std::string_view::npos) return;
    start = end + 1;
  }
}

// A row of the overview: "  SYNOPSIS   text", the text at column 2 + 27.
void append_overview_row(std::string& out, std::string_view left, std::string_view text) {
  out += "  ";
  out += left;
  if (left.size() + 2 <= kOverviewColumn) {
    out.append(kOverviewColumn - left.size(), ' ');
  } else {
    out += '\n';
    out.append(2 + kOverviewColumn, ' ');
  }
  append_lines(out, text, 2 + kOverviewColumn);
}

// A row of a command's options: the label padded to `column`, or followed
// by two spaces when it is as wide.
void append_option_row(std::string& out, const Option& o, size_t column) {
  out += "  ";
  out += o.label;
  out.append(o.label.size() < column ? column - o.label.size() : 2, ' ');
  append_lines(out, o.help, 2 + column);
}

}  // namespace

std::string overview_help() {
  std::string out(kIntro);
  for (const GroupText& g : kGroups) {
    out += g.heading;
    for (const Command& c : commands())
      if (c.group == g.group)
        for (const Listing& row : c.listing) append_overview_row(out, row.synopsis, row.text);
    out += g.note;
    out += '\n';
  }
  out += kCommonHeading;
  for (const Option& o : common_options()) append_overview_row(out, o.label, o.help);
  out += kOutro;
  return out;
}

std::string command_help(const Command& c) {
  const Syntax& s = *c.syntax;
  std::string out;
  for (size_t i = 0; i < s.forms.size(); ++i) {
    std::string head = std::string(i ? "       " : "usage: ") + "memsight " + std::string(s.names);
    out += head + ' ';
    append_lines(out, s.forms[i], head.size() + 1);
  }
  out += '\n';
  out += s.about;
  for (const Option& o : s.options)
    if (!o.label.empty()) append_option_row(out, o, s.column);
  out += s.after;
  out += '\n';
  out += kCommonHeading;
  for (const Option& o : common_options()) append_overview_row(out, o.label, o.help);
  return out;
}

std::string usage_line(const Command& c) {
  std::string out;
  for (std::string_view form : c.syntax->forms) {
    if (!out.empty()) out += " | ";
    out += "memsight " + std::string(c.name) + ' ';
    for (char ch : form) out += ch == '\n' ? ' ' : ch;
  }
  return out;
}

}  // namespace memsight::cli
