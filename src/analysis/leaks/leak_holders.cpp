// The holder of a leak, read from memsight_holders, and its sentences. Kept
// apart from the leak analysis and its advice: the holders are a fact the
// program recorded at the dump, not something the trace shows.
#include "analysis/leaks/leak_holders.h"

#include <map>

#include "util/text_format.h"

namespace memsight {
namespace {

std::string base_name(const std::string& file) {
  size_t slash = file.find_last_of("/\\");
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

std::string named(const HeldBy& h) {
  return holder_words({h.path, h.type, h.module, h.file, h.line});
}

}  // namespace

// "the list `kept` (train.py, `__main__`)", "the dict `cache` (train.py, in `train()`)".
std::string holder_words(const Holder& h) {
  std::string name = h.path, where;
  size_t colon = name.find(':'), dot = name.find('.');
  if (!h.module.empty() && name.starts_with(h.module + ".")) {
    name = name.substr(h.module.size() + 1);
    where = "`" + h.module + "`";
  } else if (colon != std::string::npos && (dot == std::string::npos || colon < dot)) {
    where = "in `" + name.substr(0, colon) + "()`";
    name = name.substr(colon + 1);
  }
  std::string file = base_name(h.file);
  std::string paren = file.empty() ? where : where.empty() ? file : file + ", " + where;
  std::string what = h.type.empty() ? "" : "the " + h.type + " ";
  return what + "`" + name + "`" + (paren.empty() ? "" : " (" + paren + ")");
}

void attach_holders(const Snapshot& snap, const Holders& holders, LeakReport& report) {
  if (holders.empty() || static_cast<size_t>(report.device) >= snap.device_count()) return;
  const uint32_t begin = snap.device_rows(report.device).first;
  for (LeakSite& site : report.sites) {
    std::map<uint32_t, int> votes;
    int graph = 0;
    for (const Survivor& s : site.newest) {
      uint64_t row = begin + static_cast<uint64_t>(s.event);
      if (s.event < 0 || row >= snap.trace.rows()) continue;
      const HeldStorage* h = holders.in_block(report.device, snap.trace.addr[row], s.bytes);
      if (!h) continue;
      ++votes[h->holder];
      graph += h->path.ends_with(".grad_fn");
    }
    auto best = votes.begin();
    for (auto it = votes.begin(); it != votes.end(); ++it)
      if (it->second > best->second) best = it;
    if (best == votes.end()) continue;
    const Holder& h = holders.holders[best->first];
    site.held_by = {h.path,
                    h.type,
                    h.module,
                    h.file,
                    h.line,
                    best->second,
                    static_cast<int64_t>(site.newest.size()),
                    graph * 2 > best->second};
  }
}

std::string held_by_text(const LeakSite& site, const Iterations& it) {
  const HeldBy& h = site.held_by;
  if (h.path.empty()) return "";
  std::string step =
      it.source == "repeating allocations" || it.source == "optimizer steps" ? "iteration" : "step";
  std::string blocks = count_of(site.surviving_count, "block");
  if (site.surviving_count > 0)
    blocks += " of " + format_bytes(static_cast<double>(site.surviving_bytes) /
                                    static_cast<double>(site.surviving_count));
  if (site.surviving_count == site.iterations_grown) blocks += ", one per " + step;
  std::string how =
      h.through_graph ? ", kept by the autograd graphs of the tensors held by " : ", held by ";
  std::string of = h.checked > h.votes ? " (" + std::to_string(h.votes) + " of the " +
                                             std::to_string(h.checked) + " newest)"
                                       : "";
  return blocks + how + named(h) + of;
}

void held_amount_json(JsonWriter& w, const HeldAmount& h) {
  w.begin_object()
      .field("path", h.holder.path)
      .field("type", h.holder.type)
      .field("module", h.holder.module)
      .field("file", h.holder.file)
      .field("line", h.holder.line)
      .field("blocks", h.blocks)
      .field("bytes", h.bytes)
      .end_object();
}

void held_by_json(JsonWriter& w, const LeakSite& site) {
  const HeldBy& h = site.held_by;
  if (h.path.empty()) return;
  w.key("held_by")
      .begin_object()
      .field("path", h.path)
      .field("type", h.type)
      .field("module", h.module)
      .field("file", h.file)
      .field("line", h.line)
      .field("of_newest", h.votes)
      .field("newest_checked", h.checked)
      .field("through_autograd_graph", h.through_graph)
      .end_object();
}

std::string holder_fix_text(const LeakReport& report) {
  for (const LeakSite& s : report.sites) {
    const HeldBy& h = s.held_by;
    if (h.path.empty()) continue;
    std::string at =
        h.line > 0 ? ", assigned at " + base_name(h.file) + ":" + std::to_string(h.line) : "";
    return "Who keeps it (named by memsight.torch at the dump): " + named(h) + at +
           (h.through_graph ? ": it holds tensors whose autograd graphs keep the rest; keep "
                              "detached tensors or numbers in it, or compute under "
                              "torch.no_grad()."
                            : ": empty it, bound its size, or stop adding to it each " +
                                  std::string("iteration."));
  }
  return "";
}

}  // namespace memsight
