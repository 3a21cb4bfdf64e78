// diff_text / diff_json / diff_folded / diff_svg (memsight/diff.h).
#include <algorithm>
#include <cstdio>

#include "analysis/diff/diff_holders.h"
#include "analysis/frames/report_text.h"
#include "analysis/leaks/leak_holders.h"
#include "memsight/diff.h"
#include "util/json_writer.h"
#include "util/lines.h"
#include "util/text_format.h"

namespace memsight {
namespace {

constexpr size_t kShown = 10;  // sites listed per group in the text

std::string moment_text(const DiffMoment& m) {
  std::string where = m.file + ", device " + std::to_string(m.device) + ", ";
  std::string entry =
      m.event < 0 ? "before the first trace entry"
                  : "after trace entry " + count_text(m.event) + " of " + count_text(m.entries);
  if (m.at == "snapshot") return where + "at the snapshot (" + entry + ")";
  if (m.at == "peak") return where + "at the allocated peak (" + entry + ")";
  if (m.at.starts_with("oom")) return where + "at " + m.at + " (" + entry + ")";
  if (m.at.starts_with("step:"))
    return where + "at the start of step " + m.at.substr(5) + " (before trace entry " +
           count_text(m.event + 1) + " of " + count_text(m.entries) + ")";
  return where + entry;
}

std::string row(const std::string& label, const std::string& a, const std::string& b,
                const std::string& c) {
  char line[200];
  std::snprintf(line, sizeof line, "  %-20s %12s %12s %12s\n", label.c_str(), a.c_str(), b.c_str(),
                c.c_str());
  return line;
}

std::string bytes_row(const std::string& label, int64_t a, int64_t b) {
  return row(label, format_bytes(a), format_bytes(b), signed_bytes(b - a));
}

void site_groups(std::string& out, const SnapshotDiff& d) {
  struct Group {
    std::string_view status;
    const char* title;
  };
  static constexpr Group kGroups[] = {{"grew", "grew"},
                                      {"appeared", "appeared (only in AFTER)"},
                                      {"shrank", "shrank"},
                                      {"vanished", "vanished (only in BEFORE)"}};
  for (const Group& g : kGroups) {
    size_t n = 0, shown = 0;
    int64_t total = 0, rest = 0;
    for (const SiteChange& s : d.sites)
      if (s.status() == g.status) {
        ++n;
        total += s.change();
      }
    if (!n) continue;
    out += "    " + std::string(g.title) + ": " + count_of(static_cast<int64_t>(n), "site") + ", " +
           signed_bytes(total) + '\n';
    for (const SiteChange& s : d.sites) {
      if (s.status() != g.status) continue;
      if (shown++ >= kShown) {
        rest += s.change();
        continue;
      }
      char line[160];
      std::snprintf(line, sizeof line, "      %11s  %10s -> %-10s %6s -> %-6s ",
                    signed_bytes(s.change()).c_str(), format_bytes(s.before).c_str(),
                    format_bytes(s.after).c_str(), count_text(s.before_count).c_str(),
                    count_text(s.after_count).c_str());
      out += line + (s.stack.empty() ? s.site : s.stack) + '\n';
    }
    if (n > kShown)
      out += "      " + signed_bytes(rest) + " in " +
             count_of(static_cast<int64_t>(n - kShown), "more site") + '\n';
  }
  size_t same = 0;
  int64_t same_bytes = 0;
  for (const SiteChange& s : d.sites)
    if (s.status() == "same") {
      ++same;
      same_bytes += s.after;
    }
  if (same)
    out += "    unchanged: " + count_of(static_cast<int64_t>(same), "site") + ", " +
           format_bytes(same_bytes) + '\n';
}

void json_moment(JsonWriter& w, const DiffMoment& m) {
  w.begin_object()
      .field("file", m.file)
      .field("device", m.device)
      .field("at", m.at)
      .field("event", m.event)
      .field("entries", m.entries)
      .field("time_us", m.time_us)
      .field("allocated", m.allocated)
      .field("active", m.active)
      .field("reserved", m.reserved)
      .field("requested", m.requested)
      .field("free", m.free_bytes)
      .field("free_blocks", m.free_blocks)
      .field("largest_free", m.largest_free)
      .fixed_field("fragmentation", m.fragmentation, 6);
  if (m.graph_pools) w.field("graph_pool_free", m.graph_pool_free);
  w.field("sites", m.sites.size()).field("note", m.note);
  if (!m.held.empty()) {  // a dump where memsight.torch named the holders
    w.key("holders").begin_array();
    for (const HeldAmount& h : m.held) held_amount_json(w, h);
    w.end_array();
  }
  w.end_object();
}

constexpr Category kAll[kCategoryCount] = {Category::Parameter,        Category::Gradient,
                                           Category::OptimizerState,   Category::Buffer,
                                           Category::Activation,       Category::Temporary,
                                           Category::AutogradInternal, Category::BeforeRecording,
                                           Category::Unknown,          Category::Communication};

std::string module_name(const std::string& m) { return m.empty() ? "(model)" : m; }

}  // namespace

std::string diff_text(const SnapshotDiff& d) {
  const DiffMoment &a = d.before, &b = d.after;
  std::string out = "BEFORE  " + moment_text(a) + "\nAFTER   " + moment_text(b) + "\n\n";
  out += row("", "before", "after", "change");
  out += bytes_row("allocated", a.allocated, b.allocated);
  out += bytes_row("active", a.active, b.active);
  out += bytes_row("reserved", a.reserved, b.reserved);
  out += bytes_row("cached free", a.free_bytes, b.free_bytes);
  out += bytes_row("largest free block", a.largest_free, b.largest_free);
  out += row("fragmentation", percent(a.fragmentation), percent(b.fragmentation),
             percent_points(b.fragmentation - a.fragmentation));
  if (a.graph_pools || b.graph_pools)  // the rows above leave them out
    out += bytes_row("graph pools free", a.graph_pool_free, b.graph_pool_free);
  out += "\n  by kind:\n";
  for (Category c : kAll) {
    int64_t x = a.categories.of(c), y = b.categories.of(c);
    if (x || y) out += bytes_row("  " + std::string(category_name(c)), x, y);
  }
  size_t shown = 0;
  for (const ModuleChange& m : d.modules) {
    if (m.after == m.before) continue;
    if (shown == 0) out += "\n  by module (made in the module itself), largest change first:\n";
    if (shown++ == kShown) {
      out += "    ...\n";
      break;
    }
    out += bytes_row("  " + module_name(m.name), m.before, m.after);
  }
  out += "\n  by allocation site (innermost frame of your code), largest change first:\n";
  site_groups(out, d);
  int64_t sum = 0;
  for (const SiteChange& s : d.sites) sum += s.change();
  out += "  the sites' changes add up to " + signed_bytes(sum) +
         (sum == b.allocated - a.allocated
              ? ", the change in allocated memory\n"
              : " (allocated memory changed by " + signed_bytes(b.allocated - a.allocated) + ")\n");
  out += held_change_text(a, b);
  if (!a.note.empty()) out += wrap_words("note (BEFORE): " + a.note, "  ");
  if (!b.note.empty()) out += wrap_words("note (AFTER): " + b.note, "  ");
  return out;
}

namespace {

void json_sites(JsonWriter& w, const std::vector<SiteChange>& sites) {
  w.begin_array();
  for (const SiteChange& s : sites) {
    w.begin_object()
        .field("site", s.site)
        .field("status", s.status())
        .field("change", s.change())
        .field("before", s.before)
        .field("after", s.after)
        .field("before_count", s.before_count)
        .field("after_count", s.after_count)
        .field("site_kind", frame_kind_name(s.kind))
        .field("stack", s.stack)
        .raw_field("frames", s.frames_json.empty() ? "[]" : s.frames_json)
        .end_object();
  }
  w.end_array();
}

}  // namespace

std::string diff_json(const SnapshotDiff& d) {
  const DiffMoment &a = d.before, &b = d.after;
  std::string out;
  JsonWriter w(out);
  w.begin_document().key("before");
  json_moment(w, a);
  w.key("after");
  json_moment(w, b);
  w.key("change")
      .begin_object()
      .field("allocated", b.allocated - a.allocated)
      .field("active", b.active - a.active)
      .field("reserved", b.reserved - a.reserved)
      .field("free", b.free_bytes - a.free_bytes)
      .end_object()
      .key("by_category")
      .begin_object();
  for (size_t c = 0; c < kCategoryCount; ++c)
    w.key(category_key(kAll[c]))
        .begin_object()
        .field("before", a.categories.bytes[c])
        .field("after", b.categories.bytes[c])
        .field("before_tagged", a.categories.tagged[c])
        .field("after_tagged", b.categories.tagged[c])
        .end_object();
  w.end_object().key("modules").begin_array();
  for (const auto& m : d.modules)
    w.begin_object()
        .field("name", m.name)
        .field("before", m.before)
        .field("after", m.after)
        .end_object();
  w.end_array().key("sites");
  json_sites(w, d.sites);
  w.end_object();
  out += '\n';
  return out;
}

Folded diff_folded(const SnapshotDiff& d) {
  std::unordered_map<std::string, int64_t> change = d.after.folded;
  for (const auto& [stack, bytes] : d.before.folded) change[stack] -= bytes;
  std::vector<std::pair<std::string, int64_t>> lines;
  for (auto& [stack, c] : change)
    if (c) lines.emplace_back((c > 0 ? "grew;" : "shrank;") + stack, c > 0 ? c : -c);
  std::sort(lines.begin(), lines.end());
  Folded out;
  for (const auto& [stack, c] : lines) {
    out.lines.push_back({out.text.size(), stack.size(), c});
    out.text += stack + ' ' + std::to_string(c) + '\n';
  }
  return out;
}

}  // namespace memsight
