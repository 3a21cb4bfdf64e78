// diff_svg / diff_html (memsight/diff.h): the difference flamegraph, and a
// self-contained page holding the diff's tables and that flamegraph inline
// (its own script zooms and searches it; the page needs no other).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "memsight/diff.h"
#include "memsight/error.h"
#include "memsight/flamegraph.h"
#include "memsight/html.h"
#include "report/bundle.h"
#include "util/text_format.h"

namespace memsight {
namespace {

constexpr size_t kMaxRows = 200;  // site rows on the page

std::string td(const std::string& text, const char* cls = nullptr) {
  return std::string("<td") + (cls ? std::string(" class=\"") + cls + "\"" : "") + ">" +
         html_escape(text) + "</td>";
}

std::string change_td(int64_t v) {
  return td(signed_bytes(v), v > 0 ? "num up" : v < 0 ? "num down" : "num");
}

// A bar as wide as |v| is of `scale`.
std::string bar_td(int64_t v, int64_t scale) {
  if (scale <= 0 || v == 0) return "<td class=\"bar\"></td>";
  double w = 100.0 * static_cast<double>(v > 0 ? v : -v) / static_cast<double>(scale);
  char b[96];
  std::snprintf(b, sizeof b, "<td class=\"bar\"><i class=\"%s\" style=\"width:%.1f%%\"></i></td>",
                v > 0 ? "up" : "down", w < 1 ? 1.0 : w);
  return b;
}

std::string moment_line(const char* side, const DiffMoment& m) {
  std::string at = m.at == "snapshot"          ? "at the snapshot"
                   : m.at == "peak"            ? "at the allocated peak"
                   : m.at.starts_with("step:") ? "at the start of step " + m.at.substr(5)
                                               : "at " + m.at;
  std::string entry =
      m.at.starts_with("step:")
          ? "before trace entry " + count_text(m.event + 1) + " of " + count_text(m.entries)
      : m.event < 0 ? "before the first trace entry"
                    : "after trace entry " + count_text(m.event) + " of " + count_text(m.entries);
  return std::string("<p><b>") + side + "</b> " + html_escape(m.file) + ", device " +
         std::to_string(m.device) + ", " + html_escape(at) + " (" + entry + ")" +
         (m.note.empty() ? "" : " <span class=\"note\">" + html_escape(m.note) + "</span>") +
         "</p>";
}

std::string totals_table(const SnapshotDiff& d) {
  const DiffMoment &a = d.before, &b = d.after;
  std::string out =
      "<table><thead><tr><th></th><th class=\"num\">before</th><th class=\"num\">after</th>"
      "<th class=\"num\">change</th></tr></thead><tbody>";
  auto bytes = [&](const char* label, int64_t x, int64_t y) {
    out += "<tr>" + td(label) + td(format_bytes(x), "num") + td(format_bytes(y), "num") +
           change_td(y - x) + "</tr>";
  };
  bytes("allocated", a.allocated, b.allocated);
  bytes("active", a.active, b.active);
  bytes("reserved", a.reserved, b.reserved);
  bytes("cached free", a.free_bytes, b.free_bytes);
  bytes("largest free block", a.largest_free, b.largest_free);
  // The change in points, as the text report writes it ("-7.0 pt").
  const double moved = b.fragmentation - a.fragmentation;
  out += "<tr>" + td("fragmentation") + td(percent(a.fragmentation), "num") +
         td(percent(b.fragmentation), "num") +
         td(percent_points(moved), moved > 0   ? "num up"
                                   : moved < 0 ? "num down"
                                               : "num") +
         "</tr>";
  return out + "</tbody></table>";
}

std::string kinds_table(const SnapshotDiff& d) {
  std::string out =
      "<table><thead><tr><th>kind</th><th class=\"num\">before</th><th class=\"num\">after</th>"
      "<th class=\"num\">change</th><th></th></tr></thead><tbody>";
  int64_t scale = 0;
  for (size_t c = 0; c < kCategoryCount; ++c) {
    int64_t v = d.after.categories.bytes[c] - d.before.categories.bytes[c];
    scale = std::max(scale, v < 0 ? -v : v);
  }
  for (size_t c = 0; c < kCategoryCount; ++c) {
    int64_t x = d.before.categories.bytes[c], y = d.after.categories.bytes[c];
    if (!x && !y) continue;
    out += "<tr>" + td(std::string(category_name(static_cast<Category>(c)))) +
           td(format_bytes(x), "num") + td(format_bytes(y), "num") + change_td(y - x) +
           bar_td(y - x, scale) + "</tr>";
  }
  return out + "</tbody></table>";
}

std::string modules_table(const SnapshotDiff& d) {
  std::string rows;
  size_t n = 0;
  int64_t scale = 0;
  for (const ModuleChange& m : d.modules) scale = std::max(scale, std::abs(m.after - m.before));
  for (const ModuleChange& m : d.modules) {
    if (m.after == m.before || n++ == 30) continue;
    rows += "<tr>" + td(m.name.empty() ? "(model)" : m.name, "mono") +
            td(format_bytes(m.before), "num") + td(format_bytes(m.after), "num") +
            change_td(m.after - m.before) + bar_td(m.after - m.before, scale) + "</tr>";
  }
  if (rows.empty())
    return "<p class=\"sub\">No memory made in a module changed (or none was attributed to a "
           "module).</p>";
  return "<table><thead><tr><th>module</th><th class=\"num\">before</th><th "
         "class=\"num\">after</th>"
         "<th class=\"num\">change</th><th></th></tr></thead><tbody>" +
         rows + "</tbody></table>";
}

std::string sites_table(const SnapshotDiff& d) {
  std::string out =
      "<table class=\"sites\"><thead><tr><th class=\"num\">change</th><th></th><th class=\"num\">"
      "before</th><th class=\"num\">after</th><th class=\"num\">allocations</th><th>site</th></tr>"
      "</thead><tbody>";
  int64_t scale = 0;
  for (const SiteChange& s : d.sites) scale = std::max(scale, std::abs(s.change()));
  for (std::string_view status : {"grew", "appeared", "shrank", "vanished"}) {
    size_t n = 0, shown = 0;
    int64_t total = 0;
    for (const SiteChange& s : d.sites)
      if (s.status() == status) {
        ++n;
        total += s.change();
      }
    if (!n) continue;
    out += "<tr class=\"group\" data-status=\"" + std::string(status) + "\"><td colspan=\"6\">" +
           std::string(status) + ": " + count_of(static_cast<int64_t>(n), "site") + ", " +
           signed_bytes(total) + "</td></tr>";
    for (const SiteChange& s : d.sites) {
      if (s.status() != status || shown++ >= kMaxRows) continue;
      std::string site = "<details><summary>" + html_escape(s.site) +
                         "</summary><pre class=\"stack\">" +
                         html_escape(s.stack.empty() ? s.site : s.stack) + "</pre></details>";
      out += "<tr class=\"site\">" + change_td(s.change()) + bar_td(s.change(), scale) +
             td(format_bytes(s.before), "num") + td(format_bytes(s.after), "num") +
             td(count_text(s.before_count) + " → " + count_text(s.after_count), "num") +
             "<td class=\"mono\">" + site + "</td></tr>";
    }
    if (n > kMaxRows)
      out += "<tr><td colspan=\"6\" class=\"sub\">" +
             count_of(static_cast<int64_t>(n - kMaxRows), "more site") +
             " (memsight diff --json lists every one)</td></tr>";
  }
  return out + "</tbody></table>";
}

}  // namespace

std::string diff_svg(const SnapshotDiff& d) {
  FlamegraphOptions opts;
  opts.title = "What changed: grew (red) and shrank (blue), by allocation stack";
  opts.difference = true;
  for (const DiffMoment* m : {&d.after, &d.before})
    for (const auto& [name, kind] : m->frame_kinds) opts.frame_kinds.add(name, kind);
  return render_flamegraph_svg(diff_folded(d), opts);
}

std::string diff_html(const SnapshotDiff& d, const std::string& title) {
  std::string page(viewer_asset("diff_page.html"));
  if (page.empty()) throw Error("html: viewer assets missing (diff_page.html)");
  int64_t sum = 0;
  for (const SiteChange& s : d.sites) sum += s.change();
  std::string svg = diff_svg(d);
  // Inline in HTML an <svg> needs neither the XML declaration nor the namespace.
  if (svg.starts_with("<?xml")) svg.erase(0, svg.find('\n') + 1);
  replace_all(svg, " xmlns=\"http://www.w3.org/2000/svg\"", "");
  std::string body = "<section><h2>What changed</h2>" + moment_line("BEFORE", d.before) +
                     moment_line("AFTER", d.after) + totals_table(d) + "</section>";
  body += "<section><h2>By kind</h2>" + kinds_table(d) + "</section>";
  body +=
      "<section><h2>By module</h2><p class=\"sub\">Memory made in each module itself (not its "
      "submodules), the largest changes first.</p>" +
      modules_table(d) + "</section>";
  body +=
      "<section><h2>By allocation site</h2><p class=\"sub\">The innermost frame of your code; "
      "the changes add up to " +
      signed_bytes(sum) + ", the change in allocated memory is " +
      signed_bytes(d.after.allocated - d.before.allocated) + ". Click a site for its stack.</p>" +
      sites_table(d) + "</section>";
  body +=
      "<section><h2>Flamegraph of the difference</h2><p class=\"sub\">Growth under "
      "<b>grew</b> (red), shrinkage under <b>shrank</b> (blue), by allocation stack; click a "
      "frame to zoom, Ctrl-F to search.</p><div class=\"flame\">" +
      svg + "</div></section>";
  replace_all(page, "{{TITLE}}", html_escape(title));
  size_t at = page.find("<!--{{BODY}}-->");
  if (at == std::string::npos) throw Error("html: diff_page.html lacks its {{BODY}} marker");
  page.replace(at, 15, body);
  return page;
}

}  // namespace memsight
