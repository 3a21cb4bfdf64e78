// Categories at one moment: totals, the module tree, and what the summary,
// the OOM diagnosis and the JSON say about them.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "analysis/kinds/classify.h"
#include "analysis/moments/moment.h"
#include "memsight/error.h"
#include "memsight/input_limits.h"
#include "util/json_writer.h"
#include "util/natural_order.h"
#include "util/text_format.h"

namespace memsight {
namespace {

constexpr size_t kMaxDepth = 64;  // module nesting shown

constexpr Category kAll[kCategoryCount] = {Category::Parameter,        Category::Gradient,
                                           Category::OptimizerState,   Category::Buffer,
                                           Category::Activation,       Category::Temporary,
                                           Category::AutogradInternal, Category::BeforeRecording,
                                           Category::Unknown,          Category::Communication};

// Modules by name, with every enclosing module, bytes added up the tree;
// returned depth first, children largest first.
std::vector<ModuleNode> module_tree(
    const std::vector<std::string>& names,
    const std::vector<std::array<int64_t, kCategoryCount>>& bytes_of) {
  std::vector<ModuleNode> nodes;
  std::unordered_map<std::string, int32_t> index;
  auto node = [&](const std::string& name, int32_t parent) {
    auto [it, fresh] = index.emplace(name, static_cast<int32_t>(nodes.size()));
    if (fresh) nodes.push_back({name, parent, {}, 0});
    return it->second;
  };
  for (size_t m = 0; m < names.size(); ++m) {
    const auto& b = bytes_of[m];
    int64_t total = 0;
    for (int64_t v : b) total += v;
    if (!total) continue;
    std::vector<int32_t> path{node("", -1)};
    const std::string& name = names[m];
    // A name deeper than kMaxDepth (a file can hold anything) hangs under
    // its kMaxDepth-th enclosing module.
    for (size_t dot = 0, depth = 1; !name.empty(); ++dot, ++depth) {
      dot = depth < kMaxDepth ? name.find('.', dot) : std::string::npos;
      path.push_back(node(name.substr(0, dot), path.back()));
      if (dot == std::string::npos) break;
    }
    for (int32_t n : path) {
      for (size_t c = 0; c < kCategoryCount; ++c) nodes[n].bytes[c] += b[c];
      nodes[n].total += total;
    }
  }
  std::vector<std::vector<int32_t>> children(nodes.size());
  for (size_t i = 1; i < nodes.size(); ++i) children[nodes[i].parent].push_back(i);
  std::vector<ModuleNode> out;
  if (nodes.empty()) return out;
  out.reserve(nodes.size());
  // Depth first, children largest first (an explicit stack: no recursion).
  std::vector<std::pair<int32_t, int32_t>> todo{{0, -1}};  // (node, parent's index in out)
  while (!todo.empty()) {
    auto [n, parent] = todo.back();
    todo.pop_back();
    const auto at = static_cast<int32_t>(out.size());
    out.push_back(nodes[n]);
    out.back().parent = parent;
    auto& ch = children[n];
    std::sort(ch.begin(), ch.end(), [&](int32_t a, int32_t b) {
      return nodes[a].total != nodes[b].total ? nodes[a].total > nodes[b].total
                                              : natural_less(nodes[a].name, nodes[b].name);
    });
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) todo.emplace_back(*it, at);
  }
  return out;
}

// Module names come from the file (tags, frame names): cut as every name is.
std::string display(const std::string& module) {
  return module.empty() ? "(model)" : cut_name(module);
}

// "a" of "a.b.c" relative to the parent "a.b": the last component.
std::string_view last_part(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

bool is_number(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::string source_word(const CategoryTotals& t, size_t c) {
  if (t.tagged[c] == t.bytes[c]) return "tagged";
  if (t.tagged[c] == 0) return "inferred";
  return format_bytes(t.tagged[c]) + " tagged";
}

std::vector<size_t> by_size(const CategoryTotals& t) {
  std::vector<size_t> order;
  for (size_t c = 0; c < kCategoryCount; ++c)
    if (t.bytes[c]) order.push_back(c);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return t.bytes[a] > t.bytes[b]; });
  return order;
}

}  // namespace

std::string_view category_name(Category c) {
  static constexpr std::string_view kNames[] = {
      "parameter", "gradient",          "optimizer state",  "buffer",  "activation",
      "temporary", "autograd-internal", "before-recording", "unknown", "communication"};
  return kNames[static_cast<size_t>(c)];
}

std::string_view category_key(Category c) {
  static constexpr std::string_view kKeys[] = {
      "parameter", "gradient",          "optimizer_state",  "buffer",  "activation",
      "temporary", "autograd_internal", "before_recording", "unknown", "communication"};
  return kKeys[static_cast<size_t>(c)];
}

int64_t CategoryTotals::total() const {
  int64_t t = 0;
  for (int64_t v : bytes) t += v;
  return t;
}

CategoryView view_at(const BlockCategories& bc, const replay::Result& rr, int64_t event) {
  CategoryView v;
  v.event = event;
  std::vector<std::array<int64_t, kCategoryCount>> by_module(bc.modules.size());
  for (size_t i = 0, n = replay::allocated_by(rr, event); i < n; ++i) {
    const replay::Lifetime& l = rr.blocks[i];
    if (l.free_requested <= event) continue;
    const BlockClass& c = bc.blocks[i];
    auto k = static_cast<size_t>(c.category);
    v.totals.bytes[k] += l.size;
    v.totals.requested[k] += l.requested;
    ++v.totals.count[k];
    if (c.tagged) v.totals.tagged[k] += l.size;
    if (c.module)
      by_module[c.module - 1][k] += l.size;
    else
      v.unattributed += l.size;
  }
  v.modules = module_tree(bc.modules, by_module);
  return v;
}

std::string module_span(const CategoryView& v, Category cat) {
  const auto c = static_cast<size_t>(cat);
  if (v.modules.empty() || v.modules[0].bytes[c] == 0) return "";
  std::vector<std::vector<int32_t>> children(v.modules.size());
  for (size_t i = 1; i < v.modules.size(); ++i)
    if (v.modules[i].bytes[c]) children[v.modules[i].parent].push_back(static_cast<int32_t>(i));
  // Down while one submodule holds nearly all of it.
  int32_t n = 0;
  for (;;) {
    int32_t next = -1;
    for (int32_t ch : children[n])
      if (v.modules[ch].bytes[c] * 10 >= v.modules[n].bytes[c] * 9) next = ch;
    if (next < 0) break;
    n = next;
  }
  const auto& kids = children[n];
  if (kids.empty()) return display(v.modules[n].name);
  std::vector<int64_t> numbers;
  for (int32_t ch : kids) {
    std::string_view part = last_part(v.modules[ch].name);
    int64_t x = 0;
    if (!is_number(part) ||
        std::from_chars(part.data(), part.data() + part.size(), x).ec != std::errc())
      break;
    numbers.push_back(x);
  }
  if (numbers.size() == kids.size()) {  // numbered siblings: layers.20-31
    std::sort(numbers.begin(), numbers.end());
    std::string ranges;
    for (size_t i = 0; i < numbers.size();) {
      size_t j = i;
      while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
      if (!ranges.empty()) ranges += ',';
      ranges += std::to_string(numbers[i]);
      if (j > i) ranges += '-' + std::to_string(numbers[j]);
      i = j + 1;
    }
    const std::string& parent = v.modules[n].name;
    return parent.empty() ? ranges : parent + "." + ranges;
  }
  std::string out;
  for (size_t i = 0; i < kids.size() && i < 3; ++i)
    out += (i ? ", " : "") + display(v.modules[kids[i]].name);
  if (kids.size() > 3) out += ", ...";
  return out;
}

std::string category_line(const CategoryView& v, size_t max_items) {
  std::string out;
  size_t shown = 0;
  for (size_t c : by_size(v.totals)) {
    if (shown++ == max_items) {
      out += ", ...";
      break;
    }
    if (!out.empty()) out += ", ";
    out += std::string(category_name(kAll[c])) + " " + format_bytes(v.totals.bytes[c]);
    std::string where = kAll[c] == Category::Activation ? module_span(v, kAll[c]) : "";
    std::string src = v.totals.tagged[c] ? source_word(v.totals, c) : "";
    if (!where.empty() || !src.empty())
      out += " (" + src + (src.empty() || where.empty() ? "" : ", ") +
             (where.empty() ? "" : "in " + where) + ")";
  }
  return out;
}

std::string category_text(const CategoryView& v, const std::string& indent) {
  std::string out;
  char line[160];
  for (size_t c : by_size(v.totals)) {
    std::snprintf(line, sizeof line, "%10s  %-18s %s", format_bytes(v.totals.bytes[c]).c_str(),
                  std::string(category_name(kAll[c])).c_str(), source_word(v.totals, c).c_str());
    out += indent + line + '\n';
  }
  return out;
}

std::string module_text(const CategoryView& v, const std::string& indent, size_t max_lines) {
  if (v.modules.empty()) return "";
  // Open the largest shown module that has submodules while lines are
  // left, showing its largest submodules and a line for the rest.
  std::vector<std::vector<int32_t>> children(v.modules.size());
  for (size_t i = 1; i < v.modules.size(); ++i)
    children[v.modules[i].parent].push_back(static_cast<int32_t>(i));  // largest first
  std::vector<uint8_t> shown(v.modules.size(), 0), open(v.modules.size(), 0);
  std::vector<size_t> hidden(v.modules.size(), 0);  // submodules left out, per opened module
  shown[0] = 1;
  size_t lines = 1;
  while (lines < max_lines) {
    int32_t best = -1;
    for (size_t i = 0; i < v.modules.size(); ++i)
      if (shown[i] && !open[i] && !children[i].empty() &&
          (best < 0 || v.modules[i].total > v.modules[best].total))
        best = static_cast<int32_t>(i);
    if (best < 0) break;
    open[best] = 1;
    const auto& ch = children[best];
    size_t room = max_lines - lines;
    size_t take = ch.size() <= room ? ch.size() : std::max<size_t>(1, room - 1);
    for (size_t k = 0; k < take; ++k) shown[ch[k]] = 1;
    hidden[best] = ch.size() - take;
    lines += take + (hidden[best] ? 1 : 0);
  }
  std::vector<int> depth(v.modules.size(), 0);
  size_t width = 0;
  for (size_t i = 1; i < v.modules.size(); ++i) depth[i] = depth[v.modules[i].parent] + 1;
  for (size_t i = 0; i < v.modules.size(); ++i)
    if (shown[i]) width = std::max(width, 2 * depth[i] + display(v.modules[i].name).size());
  width = std::min<size_t>(width, 48);
  auto line = [&](int64_t bytes, std::string name, const std::string& what) {
    if (name.size() < width) name.resize(width, ' ');
    char size[32];
    std::snprintf(size, sizeof size, "%10s  ", format_bytes(bytes).c_str());
    return indent + size + name + (what.empty() ? "" : "  " + what) + '\n';
  };
  std::string out;
  std::vector<int32_t> stack;  // opened modules whose "more" line is due
  auto close_to = [&](int d) {
    while (!stack.empty() && depth[stack.back()] >= d) {
      int32_t m = stack.back();
      stack.pop_back();
      int64_t rest = 0;
      for (size_t k = children[m].size() - hidden[m]; k < children[m].size(); ++k)
        rest += v.modules[children[m][k]].total;
      out += line(
          rest,
          std::string(2 * depth[m] + 2, ' ') + "(" + count_of(hidden[m], "more submodule") + ")",
          "");
    }
  };
  for (size_t i = 0; i < v.modules.size(); ++i) {
    if (!shown[i]) continue;
    close_to(depth[i]);
    const ModuleNode& m = v.modules[i];
    CategoryTotals t;
    t.bytes = m.bytes;
    std::string split;
    size_t k = 0;
    for (size_t c : by_size(t)) {
      if (k++ == 3) {
        split += ", ...";
        break;
      }
      split += (split.empty() ? "" : ", ") + std::string(category_name(kAll[c])) + " " +
               format_bytes(m.bytes[c]);
    }
    out += line(m.total, std::string(2 * depth[i], ' ') + display(m.name), split);
    if (hidden[i]) stack.push_back(static_cast<int32_t>(i));
  }
  close_to(0);
  if (v.unattributed) {
    char size[32];
    std::snprintf(size, sizeof size, "%10s  ", format_bytes(v.unattributed).c_str());
    out += indent + size + "(outside any module, or not known)\n";
  }
  return out;
}

std::vector<std::string> category_remedies(const CategoryView& v) {
  const int64_t total = v.totals.total();
  std::vector<std::pair<int64_t, std::string>> out;
  if (total <= 0) return {};
  auto share = [&](Category c, int percent) {
    return v.totals.of(c) > 0 && v.totals.of(c) * 100 >= total * percent;
  };
  auto holds = [&](Category c) {
    std::string where = module_span(v, c);
    return std::string(category_name(c)) + " " + format_bytes(v.totals.of(c)) + " of the " +
           format_bytes(total) + " allocated" + (where.empty() ? "" : " (most in " + where + ")");
  };
  // What to change for each kind, once it holds this share of the memory.
  struct Advice {
    Category kind;
    int percent;
    std::string_view text;
  };
  static constexpr Advice kAdvice[] = {
      {Category::OptimizerState, 20,
       "a lower-memory optimizer (8-bit or factored states, such as bitsandbytes' 8-bit Adam or "
       "Adafactor) or sharding it across ranks (ZeRO, FSDP)"},
      {Category::Activation, 20,
       "checkpoint those modules (torch.utils.checkpoint) or use a smaller batch or sequence"},
      {Category::Gradient, 20,
       "shard them across ranks (FSDP, ZeRO-2) or step the optimizer in the backward pass so each "
       "is freed once used"},
      {Category::Parameter, 30, "keep the weights in bf16, or shard them across ranks (FSDP)"},
      {Category::Temporary, 25,
       "the memory of one operation at a time; fused or in-place operations, or smaller chunks, "
       "lower it"},
  };
  for (const Advice& a : kAdvice) {
    if (!share(a.kind, a.percent)) continue;
    std::string text(a.text);
    if (a.kind == Category::Activation && module_span(v, a.kind).empty())
      text.replace(text.find("those modules"), 13, "the layers that make them");
    out.emplace_back(v.totals.of(a.kind), holds(a.kind) + ": " + text);
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<std::string> text;
  for (auto& [bytes, s] : out) text.push_back(std::move(s));
  return text;
}

std::string category_sources_text(const CategorySources& s) {
  std::string out;
  if (s.tags_matched)
    out = "tagged: " + count_of(s.tags_matched, "storage") +
          " memsight.torch recorded; the rest inferred";
  else
    out = "inferred, no memsight.torch tags";
  if (s.allocs)
    out += "; phase of " + count_text(s.phase_allocs) + " of " + count_of(s.allocs, "allocation") +
           " known" + (s.phase_allocs ? " from " + s.phases : "");
  return out;
}

void append_category_view_json(JsonWriter& w, const CategoryView& v) {
  w.begin_object()
      .field("event", v.event)
      .field("total", v.totals.total())
      .field("unattributed", v.unattributed)
      .key("by_category")
      .begin_object();
  for (size_t c = 0; c < kCategoryCount; ++c)
    w.key(category_key(kAll[c]))
        .begin_object()
        .field("bytes", v.totals.bytes[c])
        .field("tagged", v.totals.tagged[c])
        .field("requested", v.totals.requested[c])
        .field("count", v.totals.count[c])
        .end_object();
  w.end_object().key("modules").begin_array();
  for (const ModuleNode& m : v.modules) {
    w.begin_object()
        .field("name", cut_name(m.name))
        .field("parent", m.parent)
        .field("total", m.total)
        .key("by_category")
        .begin_object();
    for (size_t c = 0; c < kCategoryCount; ++c)
      if (m.bytes[c]) w.field(category_key(kAll[c]), m.bytes[c]);
    w.end_object().end_object();
  }
  w.end_array().end_object();
}

void append_category_view_json(std::string& out, const CategoryView& v) {
  JsonWriter w(out);
  append_category_view_json(w, v);
}

void append_category_sources_json(JsonWriter& w, const CategorySources& s) {
  w.begin_object()
      .field("tags", s.tags)
      .field("tags_matched", s.tags_matched)
      .field("phases", s.phases)
      .field("phase_allocs", s.phase_allocs)
      .field("allocs", s.allocs)
      .end_object();
}

CategoryView categories_at(const Snapshot& snap, size_t device, std::string_view at) {
  const size_t ndev = devices_named(snap);
  if (device >= ndev) throw Error(no_such_device(static_cast<int64_t>(device), ndev));
  replay::Result rr = replay::run(snap, device, alloc::Settings::recorded(snap));
  BlockCategories bc =
      classify_blocks(snap, device, rr, read_tags(snap, static_cast<int64_t>(device)));
  return view_at(bc, rr, moment_event(snap, device, rr, at));
}

}  // namespace memsight
