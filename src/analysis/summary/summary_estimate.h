#pragma once
// What summary says of a snapshot memsight estimated (EstimateNote): read
// from its memsight_estimate, told first in the text and the JSON.
#include <string>

#include "memsight/summary.h"
#include "util/json_writer.h"

namespace memsight {

EstimateNote read_estimate_note(const Snapshot& snap);
// The line the text starts with ("" when not an estimate).
std::string estimate_note_text(const EstimateNote& e);
// {"produced_by", "completed_by", "terms": [{"name", "bytes"}]}.
void estimate_note_json(JsonWriter& w, const EstimateNote& e);

}  // namespace memsight
