#pragma once
// Who holds a leak's survivors: the snapshot's "memsight_holders" laid over
// each leaking site's newest surviving blocks (docs/leaks.md, "Who holds it").
#include <string>

#include "memsight/holders.h"
#include "memsight/leaks.h"
#include "util/json_writer.h"

namespace memsight {

// Sets each leaking site's held_by from `holders` (the holder of most of
// its newest survivors); leaves it empty where none is named.
void attach_holders(const Snapshot& snap, const Holders& holders, LeakReport& report);

// "12 blocks of 1.0 MiB, one per step, held by the list `kept` (train.py,
// `__main__`)"; "" when the site has no holder.
std::string held_by_text(const LeakSite& site, const Iterations& it);

// "the list `kept` (train.py, `__main__`)": a holder as the reports name it.
std::string holder_words(const Holder& h);

// {"path", "type", "module", "file", "line", "blocks", "bytes"}: what one
// holder keeps, as summary, diff and the OOM diagnosis write it.
void held_amount_json(JsonWriter& w, const HeldAmount& h);

// "held_by": {...} in a leaking site's JSON, only where it has a holder.
void held_by_json(JsonWriter& w, const LeakSite& site);

// "The holder to fix: the list `kept`, assigned at train.py:12 ..."; "" when
// no site has a holder.
std::string holder_fix_text(const LeakReport& report);

}  // namespace memsight
