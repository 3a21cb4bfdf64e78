#pragma once
// What kind of memory, and whose: every live block of a device classified
// as parameter, gradient, optimizer state, buffer, activation, temporary,
// autograd-internal, before-recording, unknown or communication, and attributed to the
// module it belongs to or was made in. One classifier for every output
// (summary text and JSON, OOM diagnosis, page, Python), as memsight/frames.h
// is one frame rule.
//
// Two sources, each number says which:
//   tagged    memsight.torch wrote, beside the snapshot, every storage of the
//             model and optimizer (top-level "memsight_tags", docs/formats.md):
//             a block live at the snapshot that holds one is that category.
//   inferred  from the phase an allocation was made in (memsight's phase
//             marks in user_metadata or its annotations, else the stack and
//             torch's optimizer annotations) and from when it was freed
//             (docs/summary.md, "What kind of memory").

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memsight/snapshot.h"

namespace memsight {

class JsonWriter;  // util/json_writer.h

enum class Category : uint8_t {
  Parameter,
  Gradient,
  OptimizerState,
  Buffer,
  Activation,
  Temporary,
  AutogradInternal,
  BeforeRecording,
  Unknown,
  Communication,  // DDP buckets, FSDP all-gather and reduce-scatter buffers, NCCL's
};
inline constexpr size_t kCategoryCount = 10;
// "parameter", "gradient", "optimizer state", ..., "autograd-internal", "before-recording"
std::string_view category_name(Category c);
// The JSON key: "parameter", "optimizer_state", "autograd_internal", ...
std::string_view category_key(Category c);

// Bytes of one moment by category: block bytes (as allocated_bytes counts
// them), how many of them were tagged, requested bytes and block counts.
struct CategoryTotals {
  std::array<int64_t, kCategoryCount> bytes{}, tagged{}, requested{}, count{};
  int64_t total() const;
  int64_t of(Category c) const { return bytes[static_cast<size_t>(c)]; }
  bool operator==(const CategoryTotals&) const = default;
};

// A module of the tree at one moment, inclusive of its submodules. The
// model itself is "" (shown "(model)"); `parent` indexes the same list, -1
// for the model. Listed depth first, children largest first.
struct ModuleNode {
  std::string name;
  int32_t parent = -1;
  std::array<int64_t, kCategoryCount> bytes{};
  int64_t total = 0;
  bool operator==(const ModuleNode&) const = default;
};

struct CategoryView {
  int64_t event = -1;  // the state after this trace entry (-1: before the first)
  CategoryTotals totals;
  std::vector<ModuleNode> modules;  // empty when nothing is attributed to a module
  int64_t unattributed = 0;         // bytes made outside any module (or not known)
  bool operator==(const CategoryView&) const = default;
};

// How the device's blocks could be classified.
struct CategorySources {
  int64_t tags = 0;          // storages memsight.torch tagged on this device
  int64_t tags_matched = 0;  // of them, found in a block live at the snapshot
  std::string phases;        // "memsight", "memsight annotations", "stacks", "none"
  int64_t phase_allocs = 0;  // allocations whose phase was known
  int64_t allocs = 0;        // allocations in the trace
  bool operator==(const CategorySources&) const = default;
};

// The classification of `device` at one moment, `at`: "peak" (the
// allocated peak), "snapshot" (the end of the trace), "oom" (the first OOM),
// "oom:K" (the K-th, from 0) or a trace entry index ("205": the state after
// it; "-1": before the first). Runs the device's replay; a moment the device
// does not have throws Error.
CategoryView categories_at(const Snapshot& snap, size_t device, std::string_view at);

// {"event", "total", "unattributed", "by_category": {...}, "modules": [...]}
void append_category_view_json(JsonWriter& w, const CategoryView& v);
void append_category_view_json(std::string& out, const CategoryView& v);
void append_category_sources_json(JsonWriter& w, const CategorySources& s);

}  // namespace memsight
