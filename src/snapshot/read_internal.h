#pragma once
#include <functional>
#include <memory>
#include <string>

#include "input/source.h"
#include "memsight/reader.h"

namespace memsight {
// Reads a snapshot from the source `open` returns (called again when a read
// must start over); errors name the input as `name: ...` ("-": standard
// input), as for files, and a file of another kind is refused as such.
using OpenSource = std::function<std::unique_ptr<ByteSource>()>;
Snapshot read_snapshot_named(const OpenSource& open, const std::string& name,
                             const Progress& progress, ReadScope scope);

// A full read decodes a big trace on several threads (parallel_decode.cpp).
// An exact one (`exact`) converts nothing until the pickle has ended: for
// the rare pickle that changes a container after using it (NeedsExactRead).
Snapshot read_snapshot(ByteSource& src, const Progress& progress, ReadScope scope, bool exact);
}  // namespace memsight
