#include "report/page_categories.h"

#include <unordered_map>
#include <vector>

#include "analysis/kinds/classify.h"
#include "memsight/input_limits.h"
#include "util/json_writer.h"

namespace memsight::report {

std::string pack_categories(DeviceColumns& p, const Snapshot& snap, const Annotated& ann, size_t d,
                            const Timeline& tl) {
  const replay::Result rr = replay::run(snap, d, alloc::Settings::recorded(snap));
  const BlockCategories bc = classify_blocks(snap, d, rr, read_tags(snap, static_cast<int64_t>(d)));
  // Replay blocks by the trace entry that allocated them, and those live
  // throughout (the snapshot's blocks the trace never touched) by address.
  const uint32_t first_row = d < snap.device_count() ? snap.device_rows(d).first : 0;
  std::unordered_map<int64_t, uint32_t> by_entry, by_address;
  for (uint32_t i = 0; i < rr.blocks.size(); ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    if (l.alloc_event >= 0)
      by_entry.emplace(l.alloc_event, i);
    else if (l.free_requested == replay::Lifetime::kNever)
      by_address.emplace(l.address, i);
  }
  const size_t n = tl.kind.size();
  std::vector<int64_t> cat(n, static_cast<int64_t>(Category::BeforeRecording)), mod(n, 0);
  const DeviceEvents& ev = ann.events[d];
  for (size_t e = 0; e < n; ++e) {
    const uint32_t* block = nullptr;
    if (tl.kind[e] == ElementKind::Alloc) {
      auto it = by_entry.find(static_cast<int64_t>(ev.row[tl.src[e]] - first_row));
      if (it != by_entry.end()) block = &it->second;
    } else if (tl.kind[e] == ElementKind::Live) {
      auto it = by_address.find(snap.blocks[static_cast<size_t>(~tl.src[e])].address);
      if (it != by_address.end()) block = &it->second;
    }  // FreeOnly: allocated before recording, freed in the trace
    if (!block) continue;
    const BlockClass& c = bc.blocks[*block];
    cat[e] = static_cast<int64_t>(c.category) | (c.tagged ? 0x80 : 0);
    mod[e] = c.module;
  }
  p.ints("tl.cat", std::move(cat));
  p.ints("tl.mod", std::move(mod));
  std::string out;
  JsonWriter w(out);
  w.begin_object().key("modules").begin_array();
  for (const std::string& m : bc.modules) w.value(cut_name(m));  // names from the file
  w.end_array()
      .field("tagged", bc.sources.tags_matched)
      .field("sources", category_sources_text(bc.sources))
      .end_object();
  return out;
}

}  // namespace memsight::report
