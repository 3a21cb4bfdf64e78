#pragma once
// memsight.torch's storage tags over a device's replayed blocks: the last
// word of the classifier, since a tag is what the program said it made.
#include <cstdint>
#include <vector>

#include "analysis/kinds/classify.h"

namespace memsight {

// Tags the blocks live at the end of the replay (those of the snapshot) that
// hold a tagged storage of `device`; counts tags and matches in bc.sources.
// `tags` are ordered by device (as read_tags gives them).
void apply_tags(const std::vector<StorageTag>& tags, int64_t device, const replay::Result& rr,
                BlockCategories& bc);

}  // namespace memsight
