#pragma once
// What the byte sources (source.cpp) and the decompressors (decompress.cpp)
// share inside the input layer.
#include <memory>
#include <string_view>

#include "input/source.h"

namespace memsight {

// A stream (a pipe, a decompressor) with its first n bytes read ahead, so
// that they can be looked at (head()) before a reader starts.
std::unique_ptr<ByteSource> read_ahead(std::unique_ptr<ByteSource> inner, size_t n);
// Whether the bytes start with a gzip, zstd or xz magic number.
bool is_compressed(std::string_view d);
// A source over the raw bytes that decompresses them when they are gzip,
// zstd or xz (under the expansion limit), with its first bytes read ahead.
std::unique_ptr<ByteSource> decompressing(std::unique_ptr<ByteSource> raw);

}  // namespace memsight
