// What an output file's name asks for, and whether the command writes it:
// the format follows the name, or the command refuses it before it reads
// anything (so no file is written in a format the name does not say).
#include <algorithm>
#include <cctype>
#include <string_view>

#include "cli/cli.h"
#include "input/source.h"
#include "memsight/error.h"

namespace memsight::cli {
namespace {

struct Format {
  std::string_view name;  // as named_format returns it
  std::string_view exts[2];
  const char* label;   // "JSON (.json)"
  const char* writer;  // which command writes it, for the hint
};

constexpr Format kFormats[] = {
    {"html",
     {".html", ".htm"},
     "an HTML page (.html)",
     "`memsight view` writes a snapshot's page, `memsight profile -o NAME.html` a trace's, "
     "`memsight ranks -o NAME.html` many ranks'"},
    {"svg",
     {".svg", ""},
     "an SVG flamegraph (.svg)",
     "`memsight memory` and `segments` write them"},
    {"json",
     {".json", ""},
     "JSON (.json)",
     "`memsight summary --json`, `ranks --json` and `profile --json` write it"},
    {"text", {".txt", ""}, "text (.txt)", "`memsight summary`, `stats` and `trace` write it"},
    {"folded",
     {".folded", ""},
     "folded stacks (.folded)",
     "`memsight memory` and `segments` write them"},
    {"pickle", {".pickle", ".pkl"}, "a snapshot pickle (.pickle)", "`memsight convert` writes it"},
};

const Format* format_named(std::string_view name) {
  for (const Format& f : kFormats)
    if (f.name == name) return &f;
  return nullptr;
}

bool ends_with_nocase(std::string_view s, std::string_view ext) {
  return !ext.empty() && s.size() > ext.size() &&
         std::equal(
             ext.begin(), ext.end(), s.end() - static_cast<std::ptrdiff_t>(ext.size()),
             [](char e, char c) { return std::tolower(static_cast<unsigned char>(c)) == e; });
}

// Names of kinds of files no command writes: without this, `-o x.png` wrote
// a text report under a picture's name, as any unknown name gets the
// command's default. Names memsight knows nothing about (.log, .out) still do.
struct Foreign {
  std::string_view exts[9];
  const char* label;
};

constexpr Foreign kForeign[] = {
    {{".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".ico"}, "an image"},
    {{".pdf", ".ps", ".eps", ".doc", ".docx", ".odt", ".rtf"}, "a document"},
    {{".csv", ".tsv", ".xls", ".xlsx", ".ods", ".parquet"}, "a table"},
    {{".yaml", ".yml", ".xml", ".toml"}, "structured data"},
    {{".zip", ".tar", ".tgz", ".7z", ".rar"}, "an archive"},
    {{".pt", ".pth", ".safetensors", ".npy", ".npz", ".ckpt"}, "tensors or a checkpoint"},
};

// "an image (.png)" for a name ending in one of kForeign's extensions, else "".
std::string foreign_kind(std::string_view base) {
  for (const Foreign& f : kForeign)
    for (std::string_view ext : f.exts)
      if (!ext.empty() && ends_with_nocase(base, ext))
        return std::string(f.label) + " (" + std::string(ext) + ")";
  return "";
}

}  // namespace

std::string named_format(const std::string& path) {
  if (path == "-") return "";
  std::string_view base = without_compression_suffix(path);
  for (const Format& f : kFormats)
    for (std::string_view ext : f.exts)
      if (ends_with_nocase(base, ext)) return std::string(f.name);
  return "";
}

std::string output_format(const std::string& command, const std::string& path,
                          std::initializer_list<std::string_view> writes, std::string_view fallback,
                          const OutputRules& rules) {
  std::string what;  // what the command writes, for the messages: "A, B or C"
  size_t k = 0;
  for (std::string_view w : writes) {
    if (k++) what += k == writes.size() ? " or " : ", ";
    what += format_named(w)->label;
  }
  if (path != "-" && rules.compressible)
    compression_for_name(path);  // refuses the compressions memsight does not write
  else if (path != "-" && without_compression_suffix(path).size() != path.size())
    throw Error("-o " + path + ": only `memsight convert` writes compressed files; `memsight " +
                command + "` writes " + what + " (compress it afterwards)");
  std::string asked = named_format(path);
  if (std::string kind = foreign_kind(without_compression_suffix(path));
      asked.empty() && !kind.empty())
    throw Error("-o " + path + " names " + kind + ", which `memsight " + command +
                "` does not write: it writes " + what);
  if (asked.empty()) return std::string(fallback);
  if (std::find(writes.begin(), writes.end(), asked) == writes.end()) {
    const Format* f = format_named(asked);
    throw Error("-o " + path + " names " + f->label + ", which `memsight " + command +
                "` does not write: it writes " + what + "; " + f->writer);
  }
  if (rules.flag && asked != fallback)
    throw Error(std::string(rules.flag) + " writes " + format_named(fallback)->label + ", but -o " +
                path + " names " + format_named(asked)->label);
  return asked;
}

}  // namespace memsight::cli
