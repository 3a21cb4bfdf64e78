// measure_moments(): one replay and one classification of a device, then
// the live blocks of each moment by site, kind and module; diff_moments():
// the two measurements side by side. The sites' bytes add up to the
// replay's allocated_bytes at each moment (blocks from before the recording
// included), so the changes add up to the change in allocated memory.
#include "memsight/diff.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "allocator/replay.h"
#include "analysis/frames/frames_fmt.h"
#include "analysis/frames/report_text.h"
#include "analysis/kinds/classify.h"
#include "analysis/moments/graph_pool_free.h"
#include "analysis/moments/moment.h"
#include "memsight/error.h"
#include "memsight/input_limits.h"
#include "util/text_format.h"

namespace memsight {
namespace {

constexpr std::string_view kBeforeRecording = "<allocated before recording began>";
constexpr StackId kUnnamed = UINT32_MAX;  // the label key of blocks from before with no stack

bool live_at(const replay::Lifetime& l, int64_t event) {
  return l.alloc_event <= event && l.free_requested > event;
}

// What the numbers of a moment rest on, in a sentence ("" when exact).
std::string note_of(const replay::Result& rr) {
  int64_t off = rr.unplaced_allocs + rr.size_mismatches;
  std::string note;
  if (rr.estimated_blocks)
    note = count_of(rr.estimated_blocks, "block") + (rr.estimated_blocks == 1 ? " was" : " were") +
           " freed in the trace but allocated before it (the history began late or "
           "wrapped): their sizes are estimated";
  if (off)
    note += (note.empty() ? "" : "; ") + count_of(off, "block size") +
            " could not be replayed exactly and " + (off == 1 ? "is" : "are") +
            " estimated from the request";
  return note;
}

// The kinds of a stack's frames by their labels, long names cut as the
// diff's folded stacks cut them; copied, since a moment outlives its
// snapshot.
void add_frame_kinds(DiffMoment& m, const FrameClassifier& fc, StackId stack,
                     std::vector<bool>& seen) {
  for (FrameId f : fc.snapshot().frames.stack(stack)) {
    if (seen[f]) continue;
    seen[f] = true;
    m.frame_kinds.try_emplace(fc.frame_key(f).text(), fc.kind(f));
  }
}

// Free memory outside the CUDA graphs' private pools: theirs serves only
// their graphs (graph_pool_free.h), as summary keeps it apart.
void free_space(DiffMoment& m, const Snapshot& snap, size_t device, const replay::Result& rr,
                const replay::OomState& st) {
  m.free_bytes = st.free.bytes;
  m.free_blocks = st.free.blocks;
  m.largest_free = std::max(st.free.largest_small, st.free.largest_large);
  const GraphPoolFree gp = graph_pool_free(snap, device, rr, st.event);
  if (gp.pools) {
    m.graph_pools = true;
    m.graph_pool_free = gp.bytes;
    m.free_bytes = std::max<int64_t>(0, m.free_bytes - gp.bytes);
    m.free_blocks = std::max<int64_t>(0, m.free_blocks - gp.blocks);
    m.largest_free =
        std::min(m.free_bytes, std::max(gp.outside_largest_small, gp.outside_largest_large));
  }
  if (m.free_bytes > 0)
    m.fragmentation = 1.0 - static_cast<double>(m.largest_free) / static_cast<double>(m.free_bytes);
}

DiffMoment measure(const Snapshot& snap, size_t device, const FrameClassifier& fc,
                   const replay::Result& rr, const BlockCategories& bc, const replay::OomState& st,
                   uint32_t begin, StackFormatter& fmt) {
  DiffMoment m;
  const int64_t event = st.event;
  m.event = event;
  m.time_us = event >= 0 ? snap.trace.time_us[begin + event] : 0;
  m.allocated = st.at.allocated;
  m.active = st.at.active;
  m.reserved = st.at.reserved;
  m.requested = st.at.requested;
  free_space(m, snap, device, rr, st);
  std::map<std::string, SiteAmount> sites;
  std::unordered_map<StackId, std::string> labels;
  std::vector<bool> frame_seen(snap.frames.frame_count());
  std::string folded_key;
  std::vector<int64_t> module_bytes(bc.modules.size() + 1, 0);
  for (size_t i = 0; i < rr.blocks.size(); ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    if (!live_at(l, event)) continue;
    // A block from before the recording is named by the stack the snapshot
    // gives it, if any (recorded with context="state" or "all").
    const bool unnamed = l.alloc_event == replay::Lifetime::kBefore && l.stack == 0;
    const StackId key = unnamed ? kUnnamed : l.stack;
    auto it = labels.find(key);
    if (it == labels.end()) {
      it = labels.emplace(key, unnamed ? std::string(kBeforeRecording) : fc.site_label(key)).first;
      if (!unnamed) add_frame_kinds(m, fc, key, frame_seen);
    }
    const std::string& label = it->second;
    SiteAmount& s = sites[label];
    if (s.count == 0) {
      s.site = label;
      if (!unnamed) {
        auto f = fc.site(l.stack);
        s.kind = f ? fc.kind(*f) : FrameKind::Internal;
        s.stack = fc.describe(l.stack);
        json_stack(s.frames_json, fc, l.stack);
      } else {
        s.frames_json = "[]";
      }
    }
    s.bytes += l.size;
    ++s.count;
    module_bytes[bc.blocks[i].module] += l.size;
    folded_key.clear();
    if (unnamed)
      folded_key = kBeforeRecording;
    else
      fmt.append(folded_key, l.stack);
    m.folded[folded_key] += l.size;
  }
  m.categories = view_at(bc, rr, event).totals;
  for (auto& [label, s] : sites) m.sites.push_back(std::move(s));
  std::stable_sort(m.sites.begin(), m.sites.end(),
                   [](const SiteAmount& a, const SiteAmount& b) { return a.bytes > b.bytes; });
  for (size_t i = 1; i < module_bytes.size(); ++i)
    if (module_bytes[i]) m.modules.emplace_back(cut_name(bc.modules[i - 1]), module_bytes[i]);
  std::sort(m.modules.begin(), m.modules.end());
  m.note = note_of(rr);
  return m;
}

}  // namespace

std::pair<size_t, std::vector<size_t>> default_device(const Snapshot& snap) {
  const size_t n = devices_named(snap);
  std::vector<uint8_t> used(n, 0);
  for (size_t d = 0; d < snap.device_count(); ++d)
    if (snap.device_rows(d).first != snap.device_rows(d).second) used[d] = 2;
  for (const Segment& s : snap.segments)
    if (s.device >= 0 && static_cast<size_t>(s.device) < n)
      used[s.device] = std::max<uint8_t>(used[s.device], 1);
  size_t best = 0;
  for (uint8_t want : {2, 1}) {
    auto it = std::find(used.begin(), used.end(), want);
    if (it != used.end()) {
      best = static_cast<size_t>(it - used.begin());
      break;
    }
  }
  std::vector<size_t> others;
  for (size_t d = 0; d < n; ++d)
    if (used[d] && d != best) others.push_back(d);
  return {best, others};
}

std::pair<std::string, std::string> diff_plan(bool two_snapshots,
                                              const std::vector<std::string>& moments) {
  if (moments.size() > 2) throw Error("at most two moments, BEFORE's and AFTER's");
  if (!two_snapshots && moments.empty())
    throw Error("one snapshot needs a moment to compare with its end");
  std::string before = moments.empty() ? "snapshot" : moments[0];
  std::string after = moments.size() > 1 ? moments[1] : two_snapshots ? before : "snapshot";
  return {before, after};
}

std::vector<DiffMoment> measure_moments(const Snapshot& snap, const std::string& file,
                                        size_t device, const std::vector<std::string>& at,
                                        const UserCode& user_code) {
  const size_t ndev = devices_named(snap);
  if (device >= ndev) throw Error(file + ": " + no_such_device(static_cast<int64_t>(device), ndev));
  const alloc::Settings cfg = alloc::Settings::recorded(snap);
  // Moments named by the replay (the peak, an OOM) need one replay to find
  // them and one to keep them; the others only the second.
  const bool named = std::any_of(at.begin(), at.end(), [](const std::string& a) {
    return a == "peak" || a.starts_with("oom");
  });
  replay::Result rr;
  if (named) rr = replay::run(snap, device, cfg);
  std::vector<int64_t> events;
  for (const std::string& a : at) {
    try {
      events.push_back(moment_event(snap, device, rr, a));
    } catch (const Error& e) {
      throw Error(file + ": " + e.what());
    }
  }
  // The counters and free space of each moment: the replay that keeps them.
  rr = replay::run(snap, device, cfg, events);
  const BlockCategories bc =
      classify_blocks(snap, device, rr, read_tags(snap, static_cast<int64_t>(device)));
  FrameClassifier fc(snap, user_code);
  // Names are cut as in every report (a 100 MiB name would otherwise be
  // held, and written, once per folded stack).
  StackFormatter fmt(snap, kNameLimit);
  const uint32_t begin = device < snap.device_count() ? snap.device_rows(device).first : 0;
  std::vector<DiffMoment> out;
  for (size_t i = 0; i < at.size(); ++i) {
    auto st = std::find_if(rr.moments.begin(), rr.moments.end(),
                           [&](const replay::OomState& s) { return s.event == events[i]; });
    if (st == rr.moments.end()) {  // an empty trace: its only moment is the start
      replay::OomState start;
      start.event = -1;
      start.at = rr.start;
      st = rr.moments.insert(rr.moments.end(), start);
    }
    DiffMoment m = measure(snap, device, fc, rr, bc, *st, begin, fmt);
    m.file = file;
    m.device = static_cast<int>(device);
    m.at = at[i];
    if (at[i] == "snapshot") m.held = held_amounts(snap, read_holders(snap), device);
    m.entries = device < snap.device_count()
                    ? snap.device_rows(device).second - snap.device_rows(device).first
                    : 0;
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// The rank a file's name gives ("rank3_snapshot.pickle", "run.rank-3.pickle" -> 3).
std::optional<int64_t> rank_in_name(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  for (char& c : base) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t p = base.find("rank"); p != std::string::npos; p = base.find("rank", p + 1)) {
    if (p > 0 && std::isalpha(static_cast<unsigned char>(base[p - 1]))) continue;
    size_t i = p + 4;
    if (i < base.size() && (base[i] == '_' || base[i] == '-')) ++i;
    size_t j = i;
    while (j < base.size() && j - i < 9 && std::isdigit(static_cast<unsigned char>(base[j]))) ++j;
    if (j > i) return std::stoll(base.substr(i, j - i));
  }
  return std::nullopt;
}

}  // namespace

std::string mismatch(const DiffMoment& before, const DiffMoment& after) {
  if (before.file != after.file) {
    auto ra = rank_in_name(before.file), rb = rank_in_name(after.file);
    if (ra && rb && *ra != *rb)
      return before.file + " is rank " + std::to_string(*ra) + "'s and " + after.file + " rank " +
             std::to_string(*rb) + "'s (by their names): snapshots of different ranks";
  }
  if (before.device != after.device)
    return before.file + " is device " + std::to_string(before.device) + " and " + after.file +
           (before.file == after.file ? " (AFTER)" : "") + " device " +
           std::to_string(after.device) + ": moments of different GPUs";
  return "";
}

std::string_view SiteChange::status() const {
  if (before_count == 0 && after_count > 0) return "appeared";
  if (after_count == 0 && before_count > 0) return "vanished";
  if (after > before) return "grew";
  if (after < before) return "shrank";
  return "same";
}

SnapshotDiff diff_moments(DiffMoment before, DiffMoment after) {
  SnapshotDiff d;
  // The sites' texts move into the changes (each up to kNameLimit a name):
  // the moments keep their numbers.
  std::map<std::string, SiteChange> sites;
  for (DiffMoment* m : {&before, &after})
    for (SiteAmount& s : m->sites) {
      SiteChange& c = sites[s.site];
      c.site = s.site;
      c.kind = s.kind;
      c.stack = std::move(s.stack);  // AFTER's where it has the site
      c.frames_json = std::move(s.frames_json);
      (m == &after ? c.after : c.before) = s.bytes;
      (m == &after ? c.after_count : c.before_count) = s.count;
    }
  for (auto& [name, c] : sites) d.sites.push_back(std::move(c));
  std::stable_sort(d.sites.begin(), d.sites.end(), [](const SiteChange& a, const SiteChange& b) {
    int64_t x = a.change() < 0 ? -a.change() : a.change();
    int64_t y = b.change() < 0 ? -b.change() : b.change();
    return x > y;
  });
  std::map<std::string, ModuleChange> modules;
  // (names cut alike add up)
  for (const DiffMoment* m : {&before, &after})
    for (auto& [name, bytes] : m->modules) {
      ModuleChange& c = modules[name];
      c.name = name;
      (m == &after ? c.after : c.before) += bytes;
    }
  for (auto& [name, m] : modules) d.modules.push_back(std::move(m));
  std::stable_sort(d.modules.begin(), d.modules.end(),
                   [](const ModuleChange& a, const ModuleChange& b) {
                     int64_t x = a.after - a.before, y = b.after - b.before;
                     return (x < 0 ? -x : x) > (y < 0 ? -y : y);
                   });
  d.before = std::move(before);
  d.after = std::move(after);
  return d;
}

}  // namespace memsight
