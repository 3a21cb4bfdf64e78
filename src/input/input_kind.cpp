#include "input/input_kind.h"

#include <algorithm>
#include <cctype>

#include "memsight/error.h"
#include "util/escape.h"

namespace memsight {
namespace {

bool has(std::string_view h, std::string_view what) { return h.find(what) != h.npos; }

size_t skip_space(std::string_view h, size_t i) {
  while (i < h.size() && (h[i] == ' ' || h[i] == '\n' || h[i] == '\r' || h[i] == '\t')) ++i;
  return i;
}

bool starts_with_nocase(std::string_view h, std::string_view prefix) {
  return h.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), h.begin(), [](char want, char c) {
           return std::tolower(static_cast<unsigned char>(c)) == want;
         });
}

// The compressions memsight does not read, by magic number ("" if none).
std::string_view other_compression(std::string_view h) {
  if (h.starts_with("BZh")) return "bzip2";
  if (h.starts_with("\x04\x22\x4d\x18")) return "lz4";
  if (h.starts_with("7z\xbc\xaf\x27\x1c")) return "7z";
  if (h.starts_with("PK\x03\x04")) return "zip";
  return "";
}

}  // namespace

InputKind sniff_input(std::string_view h) {
  if (h.empty()) return InputKind::Empty;
  auto u = [&](size_t i) { return i < h.size() ? static_cast<unsigned char>(h[i]) : 0; };
  if (u(0) == 0x80 && u(1) >= 2 && u(1) <= 5) {  // pickle protocol 2-5
    // torch.save's legacy format opens with its magic number as a LONG1.
    if (h.substr(2).starts_with("\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"))
      return InputKind::TorchSave;
    // A snapshot's first key is one of these (a bare segment list's first
    // segment has total_size).
    if (has(h, "segments") || has(h, "device_traces") || has(h, "total_size"))
      return InputKind::Snapshot;
    return InputKind::Pickle;
  }
  if (h.starts_with("PK\x03\x04") && has(h, "data.pkl")) return InputKind::TorchSave;
  if (!other_compression(h).empty()) return InputKind::OtherCompression;
  size_t i = skip_space(h, 0);
  if (i == h.size()) return InputKind::Unknown;
  std::string_view text = h.substr(i);
  if (text[0] == '{') {
    for (std::string_view key : {"\"traceEvents\"", "\"schemaVersion\"", "\"deviceProperties\"",
                                 "\"displayTimeUnit\"", "\"distributedInfo\""})
      if (has(text, key)) return InputKind::ProfilerTrace;
    return InputKind::Json;
  }
  if (text[0] == '[') {
    size_t j = skip_space(text, 1);
    char next = j < text.size() ? text[j] : 0;
    if (next == '{' && has(text, "\"ph\"")) return InputKind::ProfilerTrace;  // a bare event list
    if (next == '[') {
      size_t k = skip_space(text, j + 1);
      char in = k < text.size() ? text[k] : 0;
      if (in == '-' || in == '[' || in == ']' || (in >= '0' && in <= '9'))
        return InputKind::MemoryTimeline;
    }
    return InputKind::Json;
  }
  if (text[0] == '<') {
    if (starts_with_nocase(text, "<svg") ||
        (starts_with_nocase(text, "<?xml") && has(text, "<svg")))
      return InputKind::Svg;
    if (starts_with_nocase(text, "<!doctype html") || starts_with_nocase(text, "<html")) {
      if (has(text, "GPU Memory Timeline HTML")) return InputKind::TimelinePicture;
      if (has(text, "memsight")) return InputKind::MemsightPage;
      return InputKind::Html;
    }
  }
  // Text: the first 256 bytes hold no control byte but white space (a
  // pickle's first bytes do) and are UTF-8 (a sequence cut at the end aside).
  std::string_view start = h.substr(0, 256);
  bool printable = std::all_of(start.begin(), start.end(), [](char c) {
    auto b = static_cast<unsigned char>(c);
    return b >= 0x20 ? b != 0x7f : c == '\n' || c == '\r' || c == '\t';
  });
  if (start.size() < h.size()) {  // the last sequence may be cut: leave it out
    auto last = [&] { return static_cast<unsigned char>(start.back()); };
    for (int k = 0; k < 3 && !start.empty() && (last() & 0xC0) == 0x80; ++k) start.remove_suffix(1);
    if (!start.empty() && last() >= 0xC0) start.remove_suffix(1);
  }
  if (printable && is_pickle_text(start)) return InputKind::Text;
  return InputKind::Unknown;
}

namespace {

// The path as it would be typed in a shell.
std::string shell_word(const std::string& path) {
  if (path.empty()) return "FILE";
  bool plain = std::all_of(path.begin(), path.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("._/+-=:,@%").find(c) != std::string_view::npos;
  });
  if (plain) return path;
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

const char* wanted(InputKind want) {
  switch (want) {
    case InputKind::Snapshot:
      return "a memory snapshot";
    case InputKind::ProfilerTrace:
      return "a torch.profiler trace";
    default:
      return "a memory timeline";
  }
}

}  // namespace

void expect_input(std::string_view head, InputKind want, const std::string& path) {
  InputKind kind = sniff_input(head);
  const std::string p = shell_word(path);
  // What each reader takes as its own, or leaves to its full check.
  // (Text is left to the JSON readers: their error names the byte.)
  bool readable = kind == InputKind::Unknown ||
                  (want == InputKind::Snapshot
                       ? kind == InputKind::Snapshot || kind == InputKind::Pickle
                       : kind == want || kind == InputKind::Json || kind == InputKind::Text);
  if (readable) return;
  std::string what, how;
  switch (kind) {
    case InputKind::Empty:
      throw Error("the input is empty (0 bytes), not " + std::string(wanted(want)));
    case InputKind::Snapshot:
    case InputKind::Pickle:
      what = kind == InputKind::Snapshot
                 ? "a torch memory snapshot (the pickle torch.cuda.memory._dump_snapshot writes)"
                 : "a pickle (a torch memory snapshot?)";
      how = "read it with `memsight summary " + p + "` (or view, stats, trace)";
      break;
    case InputKind::TorchSave:
      what = "a file torch.save wrote (tensors or a checkpoint)";
      how = "a memory snapshot is what torch.cuda.memory._dump_snapshot(path) writes";
      break;
    case InputKind::ProfilerTrace:
      what = "a torch.profiler trace (Chrome trace JSON)";
      how = "read it with `memsight profile " + p + "`";
      break;
    case InputKind::MemoryTimeline:
      what = "torch's memory timeline (export_memory_timeline's JSON)";
      how = "read it with `memsight profile --timeline " + p + " -o timeline.html`";
      break;
    case InputKind::TimelinePicture:  // whatever was wanted: there is nothing to read
      throw Error(
          "torch's memory timeline drawn as a picture (export_memory_timeline to .html), without "
          "its data: export it as .json, .json.gz or .raw.json.gz and read that with `memsight "
          "profile --timeline FILE -o timeline.html`");
    case InputKind::MemsightPage:
      what = "a page memsight wrote";
      how = "open it in a browser";
      break;
    case InputKind::Svg:
      what = "an SVG image";
      how = "open it in a browser";
      break;
    case InputKind::Html:
      what = "an HTML page";
      break;
    case InputKind::Json:
    case InputKind::Text:
      what = kind == InputKind::Json ? "JSON" : "text";
      how = "a memory snapshot is the pickle torch.cuda.memory._dump_snapshot(path) writes";
      break;
    case InputKind::OtherCompression:
      what = std::string(other_compression(head)) + "-compressed";
      how = "memsight reads gzip, zstd and xz: decompress it first";
      break;
    case InputKind::Unknown:
      return;
  }
  throw Error(what + ", not " + wanted(want) + (how.empty() ? "" : ": " + how));
}

std::unique_ptr<ByteSource> open_input(const std::string& path, InputKind want) {
  auto src = open_source(path);
  expect_input(src->head(), want, path);
  return src;
}

}  // namespace memsight
