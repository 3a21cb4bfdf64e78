// The page of `memsight ranks -o report.html`: the merged report's JSON
// (ranks_json) with the links to the ranks' own pages, drawn by
// viewer/src/ranks_app.js (a chart of every rank, the OOMs, the ranks that
// differ, a table, each rank's details); and those pages, each the full
// `memsight view` page of one rank, written beside it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "memsight/error.h"
#include "memsight/html.h"
#include "memsight/input_limits.h"
#include "memsight/ranks.h"
#include "memsight/reader.h"
#include "report/bundle.h"
#include "report/page_json.h"
#include "util/escape.h"
#include "util/json_writer.h"
#include "util/parallel.h"
#include "util/version.h"

namespace memsight {
namespace {

// The most pages "notable" writes.
constexpr size_t kNotablePages = 16;

// Which ranks get a page of their own (indices into r.ranks): the OOMed,
// the typical rank and those that differ (notable, at most kNotablePages),
// every rank, or none.
std::vector<size_t> page_ranks(const RanksReport& r, const std::string& which) {
  std::vector<size_t> out;
  auto add = [&](int64_t rank) {
    for (size_t i = 0; i < r.ranks.size(); ++i)
      if (r.ranks[i].rank == rank && std::find(out.begin(), out.end(), i) == out.end() &&
          (which == "all" || out.size() < kNotablePages))
        out.push_back(i);
  };
  if (which == "all") {
    for (const RankSummary& s : r.ranks) add(s.rank);
  } else if (which == "notable") {
    for (const RankOomVerdict& v : r.oom_verdicts) add(v.rank);
    add(r.typical_rank);
    for (const RankOutlier& o : r.outliers) add(o.rank);
  } else if (which != "none") {
    throw Error("pages: notable, all or none, not '" + which + "'");
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string rank_pages_folder(const std::string& out) {
  std::string_view base = out;
  if (base.size() > 5 && base.substr(base.size() - 5) == ".html") base.remove_suffix(5);
  return std::string(base) + ".ranks";
}

std::string ranks_html(const RanksReport& r, const RanksPageOptions& opts) {
  std::string title = opts.title.empty() ? "memsight ranks" : opts.title;
  // Names cut as on the snapshot page: no 100 MB frame name in every rank's row.
  std::string report = report::cut_json_strings(ranks_json(r), kNameLimit);
  while (!report.empty() && report.back() == '\n') report.pop_back();
  std::string data;
  JsonWriter w(data);
  w.begin_document()
      .field("kind", "ranks")
      .field("title", title)
      .field("generator", named_version())
      .key("pages")
      .begin_array();
  for (size_t i = 0; i < r.ranks.size(); ++i)
    w.value(i < opts.pages.size() ? std::string_view(opts.pages[i]) : std::string_view());
  w.end_array().raw_field("report", report).end_object();
  return render_json_page("ranks_page.html", "ranks_bundle.txt", title, data);
}

size_t write_ranks_page(const RanksReport& r, const std::string& out, const std::string& pages,
                        const RanksOptions& opts) {
  std::vector<size_t> which = page_ranks(r, pages);
  RanksPageOptions po;
  po.title = out.substr(out.find_last_of('/') + 1) + " - memsight ranks";
  po.pages.resize(r.ranks.size());
  const std::string folder = rank_pages_folder(out);
  // The link is the folder's name as a relative path, percent-encoded: an
  // output named "javascript:..." must not make a link that runs script.
  const std::string folder_name = folder.substr(folder.find_last_of('/') + 1);
  bool made = false;
  if (!which.empty()) {
    made = ::mkdir(folder.c_str(), 0777) == 0;
    if (!made && errno != EEXIST) throw Error(folder + ": cannot create the rank pages' folder");
  }
  std::vector<std::string> written(which.size());
  const uint64_t limit = max_expanded_setting();
  try {
    parallel_for(which.size(), rank_jobs(which.size(), opts.jobs), [&](size_t k) {
      const RankSummary& s = r.ranks[which[k]];
      set_max_expanded(limit);
      Snapshot snap = read_snapshot_file(s.path);
      HtmlOptions h;
      h.source_name = s.path.substr(s.path.find_last_of('/') + 1);
      h.title = "rank " + std::to_string(s.rank) + " - " + h.source_name + " - memsight";
      h.device = s.device;
      h.user_code = opts.user_code;
      std::string name = "rank" + std::to_string(s.rank) + ".html";
      write_file_atomic(folder + "/" + name, render_html(snap, h), opts.force);
      written[k] = folder + "/" + name;
      po.pages[which[k]] = relative_href({folder_name, name});
    });
    write_file_atomic(out, ranks_html(r, po), opts.force);
  } catch (...) {
    // No half-written report: the pages of this run go too.
    for (const std::string& p : written)
      if (!p.empty()) ::unlink(p.c_str());
    if (made) ::rmdir(folder.c_str());
    throw;
  }
  return which.size();
}

}  // namespace memsight
