#pragma once
// What a file is, told from its first bytes (decompressed): every reader
// asks before it starts, so that a file given to the wrong command is named
// with the command that reads it ("a torch.profiler trace, not a memory
// snapshot: read it with `memsight profile trace.json`") instead of failing
// on its first byte. Only the kinds that cannot be mistaken are named; the
// rest is left to the reader, whose own error then says what is wrong.

#include <memory>
#include <string>
#include <string_view>

#include "input/source.h"

namespace memsight {

enum class InputKind {
  Unknown,          // nothing recognised: the reader decides
  Empty,            // no bytes at all
  Snapshot,         // a pickle naming segments or device traces (_dump_snapshot)
  Pickle,           // another pickle (protocol 2+)
  TorchSave,        // torch.save's zip archive, or its legacy pickle
  ProfilerTrace,    // Chrome trace JSON from torch.profiler (export_chrome_trace)
  MemoryTimeline,   // export_memory_timeline's JSON: [times, sizes] or raw [[t, action, bytes,
                    // category], ...]
  TimelinePicture,  // export_memory_timeline's .html: a PNG of the timeline, no data
  MemsightPage,     // a page memsight wrote (view, profile -o x.html)
  Html,             // another HTML page
  Svg,              // an SVG image (memsight's flamegraphs)
  Json,             // other JSON
  Text,             // other text (a script, a log, memsight's text outputs)
  OtherCompression  // bzip2, lz4, brotli-framed, 7z, zip of something else...
};

// `head`: the first bytes of the input (ByteSource::head()).
InputKind sniff_input(std::string_view head);

// What a reader of `want` (Snapshot, ProfilerTrace or MemoryTimeline)
// cannot read: throws Error naming what the input is and the command that
// reads it; returns when the input may be what the reader wants (the reader
// then checks it in full). `path` is the input as the user gave it ("-" for
// standard input, "" for bytes), quoted in the suggested command.
void expect_input(std::string_view head, InputKind want, const std::string& path);

// open_source(path) for a reader of `want`, refusing a known other kind.
std::unique_ptr<ByteSource> open_input(const std::string& path, InputKind want);

}  // namespace memsight
