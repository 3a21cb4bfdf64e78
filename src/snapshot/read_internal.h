#pragma once
#include "memsight/reader.h"
#include "pickle/source.h"

namespace memsight {
// `parallel`: a big trace may be decoded on several threads (parallel_decode.cpp).
Snapshot read_snapshot(ByteSource& src, const Progress& progress, ReadScope scope,
                       bool parallel = true);
}  // namespace memsight
