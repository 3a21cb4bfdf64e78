#pragma once
// The JSON of the page's metadata: Python values from the snapshot, and
// reports cut to the page's name limit.
#include <string>
#include <string_view>

#include "memsight/snapshot.h"
#include "util/json_writer.h"

namespace memsight::report {

// Python value as JSON (allocator_settings and friends); what JSON lacks
// (big ints, bytes, non-string keys) becomes a string. Past max_bytes of
// JSON, texts are cut and containers end in "…" (allocator settings take a
// few hundred bytes; a hostile file's can nest millions of references).
void pyvalue_json(JsonWriter& w, const PyValue& v, size_t max_bytes = 64 << 10);

// `json` (valid JSON, as memsight writes it) with every string longer than
// `limit` bytes cut by cut_name (memsight/input_limits.h): what a page embeds
// of a report (leaks, ranks) holds no 100 MB name.
std::string cut_json_strings(std::string json, size_t limit);

}  // namespace memsight::report
