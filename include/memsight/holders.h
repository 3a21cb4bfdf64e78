#pragma once
// Who holds the live storages of a snapshot: the top-level
// "memsight_holders" that memsight.torch writes at a dump (docs/formats.md),
// read into values. Each storage names the Python path that keeps it alive
// ("__main__.kept[11]"); storages held through the same container share one
// holder ("__main__.kept", a list, defined at train.py:12).
#include <cstdint>
#include <string>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight {

struct Holder {
  std::string path;    // "__main__.kept", "train:cache", "model.0._forward_hooks[3] → kept"
  std::string type;    // of the holding object: "list", "dict", ... ("" unknown)
  std::string module;  // where its root name lives: "__main__", "train"
  std::string file;    // that module's or function's file ("" unknown)
  int64_t line = 0;    // where the root name is assigned (0 unknown)
  bool operator==(const Holder&) const = default;
};

struct HeldStorage {
  int64_t device = 0, address = 0, size = 0;
  uint32_t holder = 0;  // index into Holders::holders
  std::string path;     // the whole path: "__main__.kept[11]"
  bool operator==(const HeldStorage&) const = default;
};

struct Holders {
  std::vector<Holder> holders;
  std::vector<HeldStorage> storages;  // by (device, address)
  bool complete = true;               // false: the walk stopped at its depth or time budget
  bool empty() const { return storages.empty(); }
  // The storage that starts inside [address, address + size) of `device`
  // (a block holds one storage, at its start or past a rounding), or null.
  const HeldStorage* in_block(int64_t device, int64_t address, int64_t size) const;
};

// The snapshot's live blocks of `device` by holder: how many and how many
// bytes each holder keeps at the dump; largest first, ties by path.
struct HeldAmount {
  Holder holder;
  int64_t blocks = 0, bytes = 0;
  bool operator==(const HeldAmount&) const = default;
};
std::vector<HeldAmount> held_amounts(const Snapshot& snap, const Holders& holders, int64_t device);

// The snapshot's "memsight_holders"; empty where it has none or the value
// is not of the documented shape (entries that are not are skipped).
Holders read_holders(const Snapshot& snap);

}  // namespace memsight
