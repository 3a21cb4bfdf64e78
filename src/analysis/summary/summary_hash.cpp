#include "analysis/summary/summary_hash.h"

#include "analysis/alike/value_hash.h"

namespace memsight {

// Each type's fields, in their order (a field left out costs comparisons,
// never a wrong group).
void fold_fields(ValueHash& h, const CategoryTotals& t) {
  h(t.bytes)(t.tagged)(t.requested)(t.count);
}
void fold_fields(ValueHash& h, const ModuleNode& m) { h(m.name)(m.parent)(m.bytes)(m.total); }
void fold_fields(ValueHash& h, const CategoryView& v) {
  h(v.event)(v.totals)(v.modules)(v.unattributed);
}
void fold_fields(ValueHash& h, const CategorySources& s) {
  h(s.tags)(s.tags_matched)(s.phases)(s.phase_allocs)(s.allocs);
}
void fold_fields(ValueHash& h, const SiteStat& s) { h(s.site)(s.kind)(s.stack)(s.bytes)(s.count); }
void fold_fields(ValueHash& h, const Remedy& r) { h(r.kind)(r.text); }
void fold_fields(ValueHash& h, const SimulatedFix& f) {
  h(f.verdict)(f.settings)(f.peak_reserved)(f.recorded_peak)(f.cap_inferred)(f.cap_low);
  h(f.cap_high)(f.reproduces)(f.recording_ends)(f.growth)(f.growth_window)(f.postponed_by);
  h(f.growth_steady)(f.by_steps);
}
void fold_fields(ValueHash& h, const OomReport& o) {
  h(o.event)(o.time_us)(o.requested)(o.device_free)(o.device_total)(o.limit)(o.allocated);
  h(o.active)(o.reserved)(o.cached_free)(o.largest_free)(o.largest_free_pool)(o.pool);
  h(o.releasable)(o.stack)(o.site)(o.verdict)(o.causes)(o.explanation)(o.remedies);
  h(o.categories)(o.fix)(o.simulated);
}

uint64_t alike_hash(const DeviceSummary& d) {
  ValueHash h;
  h(d.entries)(d.peak_allocated)(d.peak_allocated_event)(d.peak_allocated_time_us);
  h(d.peak_active)(d.peak_active_event)(d.peak_active_time_us);
  h(d.peak_reserved)(d.peak_reserved_event)(d.peak_reserved_time_us)(d.peak_requested);
  h(d.top_sites)(d.sites_total)(d.before_recording_bytes)(d.before_recording_count);
  h(d.before_recording_start_bytes)(d.before_recording_start_count);
  h(d.allocated_now)(d.active_now)(d.requested_now)(d.reserved_now)(d.free_now);
  h(d.largest_free_now)(d.free_blocks_now)(d.fragmentation);
  h(d.graph_pools)(d.graph_pool_reserved)(d.graph_pool_allocated)(d.graph_pool_free);
  h(d.segments_now)(d.orphan_frees)(d.history_wrapped)(d.exact)(d.exactness)(d.ooms);
  h(d.categories_peak)(d.categories_now)(d.category_sources);
  return h.value();
}

}  // namespace memsight
