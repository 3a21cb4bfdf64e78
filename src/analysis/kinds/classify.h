#pragma once
// The classifier of memsight/categories.h over one device's replay: each
// block of replay::Result::blocks gets a category and a module. The summary,
// the page and categories_at() all ask it, so there is one answer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "allocator/replay.h"
#include "memsight/categories.h"

namespace memsight {

// When an allocation was made (docs/summary.md, "What kind of memory").
enum class Phase : uint8_t {
  Unknown,    // nothing recorded says (no stack, no marks)
  None,       // outside any forward, backward or optimizer step (inputs, the loss, ...)
  Init,       // moving or casting a module (Module._apply: .to(), .cuda(), .half())
  Forward,    // a module's forward
  Backward,   // the autograd engine's backward
  Recompute,  // a forward re-run inside the backward (activation checkpointing)
  Optimizer,  // an optimizer's step
};

// The kind an allocation's stack names outright, whatever its lifetime: a
// frame of a communication library (DDP's reducer, c10d, FSDP2's
// collectives, NCCL) or of FSDP's parameter storage, inside any phase.
enum class KindHint : uint8_t { None, Communication, Parameter };

// A storage memsight.torch tagged at dump time (top-level "memsight_tags").
struct StorageTag {
  int64_t device = 0, address = 0, size = 0;
  Category category = Category::Unknown;
  std::string name, module;
};
// Every device's tags, ordered by device; entries that are not well formed
// are skipped. With a device: that device's alone (a reader per device
// takes its own, not the whole list each).
std::vector<StorageTag> read_tags(const Snapshot& snap);
std::vector<StorageTag> read_tags(const Snapshot& snap, int64_t device);

struct BlockClass {
  Category category = Category::Unknown;
  bool tagged = false;
  Phase phase = Phase::Unknown;  // when it was made (Unknown for blocks from before the trace)
  uint32_t module = 0;           // 0: none; else 1 + index into BlockCategories::modules
};
// "forward", "backward", "optimizer step", ... ("" for Unknown).
std::string_view phase_name(Phase p);

struct BlockCategories {
  std::vector<BlockClass> blocks;    // parallel to replay::Result::blocks
  std::vector<std::string> modules;  // dotted names; "" is the model itself
  CategorySources sources;
};

// When each allocation of a device's trace was made: the half of the
// classification that the trace alone decides, so that it can be found
// beside the replay.
struct PhaseTimeline;  // the runs and passes of one phase they form (phase_timeline.h)
struct AllocPhases {
  struct Alloc {
    uint32_t module = 0;  // as BlockClass::module
    Phase phase = Phase::Unknown;
    bool accumulate = false;  // made by AccumulateGrad (C++ stacks)
    KindHint hint = KindHint::None;
  };
  std::vector<Alloc> allocs;  // the trace's alloc entries, in order
  std::vector<std::string> modules;
  CategorySources sources;  // allocs, phase_allocs and phases
  std::shared_ptr<const PhaseTimeline> timeline;
};
AllocPhases find_phases(const Snapshot& snap, size_t device);

BlockCategories classify_blocks(const Snapshot& snap, size_t device, const replay::Result& rr,
                                const std::vector<StorageTag>& tags);
// The same, with the device's phases found already.
BlockCategories classify_blocks(const Snapshot& snap, size_t device, const replay::Result& rr,
                                const std::vector<StorageTag>& tags, AllocPhases phases);

// The blocks allocated after trace entry `event` (as group_sites counts
// them), by category and module.
CategoryView view_at(const BlockCategories& bc, const replay::Result& rr, int64_t event);

// What the text and the OOM diagnosis say about a moment.
// "optimizer state 9.1GiB (tagged), activation 5.2GiB (layers.20-31), ..."
std::string category_line(const CategoryView& v, size_t max_items = 5);
// The summary text's lines: one per category, largest first; the module
// tree (the largest modules opened first, at most max_lines), each line
// `indent`ed.
std::string category_text(const CategoryView& v, const std::string& indent);
std::string module_text(const CategoryView& v, const std::string& indent, size_t max_lines = 12);
// How the blocks were told apart, in words: "312 storages tagged by
// memsight.torch; the rest inferred, phases from memsight marks, stacks".
std::string category_sources_text(const CategorySources& s);
// Remedies named by the categories holding most at an OOM (demand only).
std::vector<std::string> category_remedies(const CategoryView& v);
// The modules holding most of category `c`, compressed: "layers.20-31".
std::string module_span(const CategoryView& v, Category c);

}  // namespace memsight
