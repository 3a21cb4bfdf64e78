#pragma once
#include "memsight/reader.h"
#include "pickle/source.h"

namespace memsight {
Snapshot read_snapshot(ByteSource& src, const Progress& progress, ReadScope scope);
}
