// OOM causes, in the order a person can act on them:
//   fragmentation    enough unused memory was cached, but no free block of the
//                    request's pool was large enough;
//   other processes  the device was short of memory that this process's
//                    allocator does not hold;
//   limit            a cap inside the process (set_per_process_memory_fraction)
//                    refused a new segment while the device had room;
//   demand           live tensors need more than there is, even with every
//                    unused cached byte released.
// Several hold together often (a fragmented cache under a cap); all that
// hold are listed, the first is the verdict.
#include "analysis/summary/oom_diagnosis.h"

#include <algorithm>

#include "analysis/leaks/leak_holders.h"
#include "analysis/whatif/whatif.h"
#include "util/text_format.h"

namespace memsight {
namespace {

// The segment a request needs when no cached block fits (torch's sizes).
int64_t segment_for(int64_t request) {
  constexpr int64_t MiB = 1 << 20;
  if (request <= MiB) return 2 * MiB;
  if (request < 10 * MiB) return 20 * MiB;
  return (request + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
}

}  // namespace

std::string_view oom_cause_name(OomCause c) {
  switch (c) {
    case OomCause::Fragmentation:
      return "fragmentation";
    case OomCause::OtherProcesses:
      return "other processes";
    case OomCause::Limit:
      return "limit";
    case OomCause::Demand:
      break;
  }
  return "demand";
}

std::vector<std::string> oom_cause_names(const std::vector<OomCause>& causes) {
  std::vector<std::string> out;
  for (OomCause c : causes) out.emplace_back(oom_cause_name(c));
  return out;
}

std::vector<std::string> remedy_texts(const std::vector<Remedy>& remedies) {
  std::vector<std::string> out;
  for (const Remedy& r : remedies) out.push_back(r.text);
  return out;
}

namespace {

// Which causes hold, from the allocator's numbers at the OOM.
struct Causes {
  int64_t need = 0;     // the new memory the request needed: a segment, or the request itself
  int64_t outside = 0;  // device memory in use but not reserved by this allocator (-1: unknown)
  bool fragmentation = false, others = false, capped = false, demand = false;
};

Causes find_causes(const OomReport& o, bool expandable_segments) {
  Causes c;
  c.need = expandable_segments ? o.requested : segment_for(o.requested);
  const int64_t GiB = int64_t{1} << 30;
  c.fragmentation = o.cached_free >= o.requested && o.largest_free_pool < o.requested;
  c.capped = o.limit >= 0 ? o.reserved + c.need > o.limit : c.need <= o.device_free;
  c.outside = o.device_total > 0 ? o.device_total - o.device_free - o.reserved : -1;
  c.others = !c.capped && c.need > o.device_free && o.device_total > 0 &&
             c.outside > std::max<int64_t>(GiB, o.device_total / 20);
  c.demand = !c.fragmentation;
  return c;
}

// The request and the allocator's state then, in a sentence or two.
std::string request_facts(const OomReport& o) {
  std::string facts =
      "Requested " + format_bytes(o.requested) + " (" + o.pool +
      " pool): " + format_bytes(o.allocated) + " was allocated by live tensors, " +
      format_bytes(o.reserved) + " reserved by PyTorch, of it " + format_bytes(o.cached_free) +
      " cached but unused (" +
      (o.largest_free_pool ? "largest free block " + format_bytes(o.largest_free_pool) + " in the "
                           : std::string("no free block in the ")) +
      o.pool + " pool, " + format_bytes(o.largest_free) + " the largest in any" +
      (o.graph_pool_free ? "; " + format_bytes(o.graph_pool_free) +
                               " more free inside CUDA graphs' private pools, which only their "
                               "graphs use"
                         : std::string()) +
      "). The device had " + format_bytes(o.device_free) + " free";
  if (o.device_total > 0) facts += " of " + format_bytes(o.device_total);
  if (o.limit >= 0) facts += "; the allocator's limit was " + format_bytes(o.limit);
  return facts + ".";
}

void remedy(OomReport& o, RemedyKind kind, std::string text) {
  o.remedies.push_back({kind, std::move(text)});
}

// Each cause that holds adds its sentence to `why` and its remedies.
void explain_fragmentation(OomReport& o, std::string& why) {
  o.causes.push_back(OomCause::Fragmentation);
  why +=
      " Fragmentation: more than the request sat unused in the cache, but in pieces: no "
      "free block of " +
      format_bytes(o.requested) + " in the " + o.pool + " pool";
  if (o.largest_free > o.largest_free_pool)
    why += " (the larger free blocks are in the other pool, which this request cannot use)";
  why += ". Those segments also hold live tensors, so the allocator could not release them.";
  remedy(o, RemedyKind::ExpandableSegments,
         "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, so segments grow in place and "
         "free space is not stranded between live tensors");
  remedy(o, RemedyKind::FewerTemporaries,
         "avoid many odd-sized or short-lived temporaries that pin segments (reuse buffers, "
         "allocate fixed sizes); PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:N keeps large blocks "
         "from being split");
}

void explain_others(OomReport& o, const Causes& c, std::string& why) {
  o.causes.push_back(OomCause::OtherProcesses);
  why += " Memory outside this allocator: " + format_bytes(c.outside) +
         " of the device was in use but not reserved by PyTorch (other processes, NCCL or "
         "cuBLAS workspaces, the CUDA context, non-PyTorch allocations).";
  remedy(o, RemedyKind::GpuAlone,
         "check what else runs on the GPU (nvidia-smi) and give this job the device alone");
}

void explain_cap(OomReport& o, const Causes& c, std::string& why) {
  o.causes.push_back(OomCause::Limit);
  if (o.limit >= 0)
    why += " Memory cap: a new " + format_bytes(c.need) +
           " segment would pass the allocator's limit of " + format_bytes(o.limit) +
           " (torch.cuda.set_per_process_memory_fraction), though the device had " +
           format_bytes(o.device_free) + " free.";
  else
    why += " Memory cap: the device's free memory was enough for the " + format_bytes(c.need) +
           " segment the request needed, so a limit inside the process refused it "
           "(torch.cuda.set_per_process_memory_fraction or a similar cap).";
  remedy(o, RemedyKind::RaiseCap,
         "raise the cap (torch.cuda.set_per_process_memory_fraction) if it is "
         "lower than the job needs");
}

void explain_demand(OomReport& o, const Causes& c, const SiteStat& holder, std::string& why) {
  o.causes.push_back(OomCause::Demand);
  why += " True demand: even with all " + format_bytes(o.cached_free) +
         " of unused cache released, the request would not fit";
  why += c.capped ? " under the limit." : " on the device.";
  remedy(o, RemedyKind::SmallerBatch, "reduce the batch size or sequence length");
  if (holder.count)
    remedy(o, RemedyKind::CheckpointSite,
           "the site holding most at this moment is " + holder.site + " (" +
               format_bytes(holder.bytes) + " in " + count_of(holder.count, "block") +
               "): checkpoint its activations (torch.utils.checkpoint) or "
               "free them earlier");
  remedy(o, RemedyKind::EmptyCacheBetweenPhases,
         "call torch.cuda.empty_cache() only between phases (e.g. after evaluation), not in the "
         "training loop");
}

}  // namespace

void diagnose_oom(OomReport& o, const SiteStat& holder, bool expandable_segments) {
  const Causes c = find_causes(o, expandable_segments);
  o.causes.clear();
  o.remedies.clear();
  std::string why;
  if (c.fragmentation) explain_fragmentation(o, why);
  if (c.others) explain_others(o, c, why);
  if (c.capped) explain_cap(o, c, why);
  if (c.demand) explain_demand(o, c, holder, why);
  if (o.held_by.blocks)
    why += " The most live memory then was held by " + holder_words(o.held_by.holder) + ": " +
           count_of(o.held_by.blocks, "block") + ", " + format_bytes(o.held_by.bytes) +
           " (named by memsight.torch at the dump).";
  o.verdict = o.causes.front();
  o.explanation = request_facts(o) + why;
}

namespace {

std::string peak_against_recorded(const SimulatedFix& f, const char* same, const char* other) {
  return f.peak_reserved == f.recorded_peak ? std::string(same)
                                            : other + format_bytes(f.recorded_peak);
}

// "about 4 entries" / "about 3 steps".
std::string about(const SimulatedFix& f, int64_t n) {
  return "about " + (f.by_steps ? count_of(n, "step") : count_of(n, "entry", "entries"));
}

// Where the history ends at this OOM: what the simulation covers, and how
// far allocated memory's climb says a setting that fits carries the job.
std::string recorded_part_sentence(const SimulatedFix& f) {
  std::string s =
      " The recording ends at this OOM, so the simulation covers the recorded part only";
  if (f.growth_window > 0 && f.growth > 0)
    s += "; allocated memory grew " + format_bytes(static_cast<double>(f.growth)) + " over " +
         (f.by_steps ? count_of(f.growth_window, "step")
                     : count_of(f.growth_window, "entry", "entries")) +
         " before it" + (f.growth_steady ? ", steadily" : ", unevenly");
  s += ".";
  if (f.verdict == SimulatedFix::Verdict::Fits && f.postponed_by >= 0)
    s += " At that pace " + f.settings + " postpones the OOM by " + about(f, f.postponed_by) +
         " rather than saves the job.";
  return s;
}

std::string fix_sentence(const SimulatedFix& f) {
  using V = SimulatedFix::Verdict;
  std::string s = "Simulated on this history: ";
  switch (f.verdict) {
    case V::FitsNearCapHigh:
      s += "with " + f.settings +
           " this request fits only if the cap was near the top of what the recording allows (" +
           whatif::size_range(f.cap_low, f.cap_high).second + "; not with " +
           whatif::size_range(f.cap_low, f.cap_high).first +
           "): the snapshot does not record the cap (memsight whatif --memory-fraction F answers "
           "for the exact one).";
      break;
    case V::Fits:
      s += "with " + f.settings + " this request fits: peak reserved " +
           format_bytes(f.peak_reserved) +
           peak_against_recorded(f, ", as recorded", " instead of ") + ".";
      break;
    case V::NoneFits:
      s += "none of the standard allocator settings (expandable_segments, max_split_size_mb, "
           "garbage_collection_threshold, roundup_power2_divisions) lets this request fit.";
      break;
  }
  if (f.cap_inferred && f.verdict != V::FitsNearCapHigh)
    s += " The cap is not recorded: simulated from " +
         whatif::size_range(f.cap_low, f.cap_high).first + " to " +
         whatif::size_range(f.cap_low, f.cap_high).second + ", what the recording allows.";
  if (f.recording_ends && f.verdict != V::NoneFits) s += recorded_part_sentence(f);
  if (!f.reproduces)
    s += " The simulation does not reproduce this recording exactly (memsight whatif says how).";
  return s;
}

Remedy fix_remedy(const SimulatedFix& f) {
  using V = SimulatedFix::Verdict;
  switch (f.verdict) {
    case V::FitsNearCapHigh:
      return {RemedyKind::SimulatedSetting,
              "set PYTORCH_CUDA_ALLOC_CONF=" + f.settings +
                  " may save it: simulated on this history, the request fits with a cap near " +
                  whatif::size_range(f.cap_low, f.cap_high).second + " but not with " +
                  whatif::size_range(f.cap_low, f.cap_high).first +
                  " (the snapshot does not record the cap)"};
    case V::Fits: {
      std::string set = f.settings == "defaults" ? std::string("unset PYTORCH_CUDA_ALLOC_CONF")
                                                 : "set PYTORCH_CUDA_ALLOC_CONF=" + f.settings;
      if (f.postponed_by >= 0)
        return {RemedyKind::SimulatedSetting,
                set + " only postpones it, by " + about(f, f.postponed_by) +
                    " at the pace allocated memory was climbing (simulated on this history up "
                    "to the OOM, where the recording ends): find what keeps growing"};
      return {RemedyKind::SimulatedSetting,
              set + " (simulated on this history: the request fits, and reserved memory peaks at " +
                  format_bytes(f.peak_reserved) +
                  peak_against_recorded(f, " as recorded", " instead of ") +
                  (f.recording_ends ? ", up to the OOM, where the recording ends)" : ")")};
    }
    case V::NoneFits:
      break;
  }
  return {RemedyKind::NoSettingSaves,
          "no allocator setting alone saves it: simulated on this history, none of "
          "expandable_segments, max_split_size_mb, garbage_collection_threshold or "
          "roundup_power2_divisions lets this request fit (memsight whatif shows each)"};
}

}  // namespace

void cite_fix(OomReport& o, const SimulatedFix& fix) {
  o.fix = fix;
  o.simulated = fix_sentence(fix);
  // The simulated answer replaces the generic advice to expand segments.
  std::erase_if(o.remedies,
                [](const Remedy& r) { return r.kind == RemedyKind::ExpandableSegments; });
  // A setting that saves it is the first thing to try. That none does comes
  // first too, before the generic advice on fragmentation, except under true
  // demand, where what to cut (the diagnosis' first remedy) is the answer.
  const bool after_first = fix.verdict == SimulatedFix::Verdict::NoneFits &&
                           o.verdict == OomCause::Demand && !o.remedies.empty();
  o.remedies.insert(o.remedies.begin() + (after_first ? 1 : 0), fix_remedy(fix));
}

}  // namespace memsight
