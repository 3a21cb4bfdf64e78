// The flamegraph trees of the report page: torch's `memory` and `segments`
// folded stacks (the lines _write_blocks prints) as one trie per device,
// built from ids. Nodes of equal name text are one node, as the folded text
// would make them; a name is a frame's label or a text, built only by the
// browser (frame labels) or once per distinct text.
#include <algorithm>
#include <unordered_map>

#include "analysis/frames/frames_fmt.h"
#include "report/page_data.h"

namespace memsight::report {
namespace {

// A trie node: its parent, its name's class, its bytes.
struct Node {
  uint32_t parent, cls;
  int64_t value;
};

// (parent node, name class) -> child node, open addressing over the nodes
// themselves: a slot holds a node id (its key is the node's parent and
// class), 4 bytes, where std::unordered_map takes some 50 a node. A tree of
// millions of nodes is the rule here (one per frame of each segment's stack).
class ChildIndex {
 public:
  explicit ChildIndex(const std::vector<Node>& nodes) : nodes_(nodes), slots_(64, kEmpty) {}
  // The child's node id, or `next` after storing it when absent (the
  // caller then appends node `next` with this parent and class).
  std::pair<uint32_t, bool> find_or_add(uint32_t parent, uint32_t cls, uint32_t next) {
    if (10 * (used_ + 1) > 7 * slots_.size()) grow();
    size_t mask = slots_.size() - 1;
    for (size_t i = mix(parent, cls) & mask;; i = (i + 1) & mask) {
      uint32_t id = slots_[i];
      if (id == kEmpty) {
        slots_[i] = next;
        ++used_;
        return {next, true};
      }
      if (nodes_[id].parent == parent && nodes_[id].cls == cls) return {id, false};
    }
  }

  void release() {
    std::vector<uint32_t>().swap(slots_);
    used_ = 0;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  static uint64_t mix(uint32_t parent, uint32_t cls) {  // splitmix64's finaliser
    uint64_t x = uint64_t{parent} << 32 | cls;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  void grow() {
    std::vector<uint32_t> old(slots_.size() * 2, kEmpty);
    old.swap(slots_);
    size_t mask = slots_.size() - 1;
    for (uint32_t id : old) {
      if (id == kEmpty) continue;
      size_t i = mix(nodes_[id].parent, nodes_[id].cls) & mask;
      while (slots_[i] != kEmpty) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }
  const std::vector<Node>& nodes_;
  std::vector<uint32_t> slots_;
  size_t used_ = 0;
};

class TrieBuilder {
 public:
  explicit TrieBuilder(const Snapshot& snap)
      : frames_(snap), frame_class_(snap.frames.frame_count(), kNone), children_(nodes_) {
    nodes_.push_back({0, literal("all"), 0});
  }

  // Adds a folded line: `head` (';'-separated texts), then the kept frames
  // of `stack` outermost first (or `tail` instead when there is no stack).
  void add(std::string_view head, const StackId* stack, std::string_view tail, int64_t value) {
    if (value <= 0) return;
    uint32_t cur = 0;
    nodes_[0].value += value;
    auto descend = [&](uint32_t cls) {
      auto [child, added] = children_.find_or_add(cur, cls, static_cast<uint32_t>(nodes_.size()));
      if (added) nodes_.push_back({cur, cls, 0});
      cur = child;
      nodes_[cur].value += value;
    };
    auto texts = [&](std::string_view s) {
      for (size_t b = 0;;) {
        size_t e = s.find(';', b);
        descend(literal(s.substr(b, e == std::string_view::npos ? e : e - b)));
        if (e == std::string_view::npos) break;
        b = e + 1;
      }
    };
    texts(head);
    if (!stack) return texts(tail);
    auto frames = frames_.snapshot().frames.stack(*stack);
    if (frames.empty()) return texts("<non-python>");
    bool any = false;
    for (size_t i = frames.size(); i-- > 0;) {
      if (!frames_.kept(frames[i])) continue;
      any = true;
      frame(frames[i], descend);
    }
    if (!any) descend(literal(""));  // every frame filtered: torch's line ends in ';'
  }

  FlameTree finish() {
    children_.release();  // done with lookups
    // Children of each node, by name text (flamegraph.pl's order).
    std::vector<uint32_t> first(nodes_.size() + 1, 0), kids(nodes_.size() - 1);
    for (size_t i = 1; i < nodes_.size(); ++i) ++first[nodes_[i].parent + 1];
    for (size_t i = 1; i < first.size(); ++i) first[i] += first[i - 1];
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (uint32_t i = 1; i < nodes_.size(); ++i) kids[fill[nodes_[i].parent]++] = i;
    FlameTree tree;
    std::vector<int64_t> text_of(texts_.size(), -1);
    std::vector<std::pair<uint32_t, int32_t>> todo{{0, -1}};
    while (!todo.empty()) {
      auto [k, parent] = todo.back();
      todo.pop_back();
      auto id = static_cast<int32_t>(tree.parent.size());
      tree.parent.push_back(parent);
      const Class& c = classes_[nodes_[k].cls];
      if (c.frame >= 0) {
        tree.name.push_back(~int64_t{c.frame});
      } else {
        int64_t& t = text_of[c.text];
        if (t < 0) {
          t = static_cast<int64_t>(tree.texts.size());
          tree.texts.emplace_back(texts_.get(c.text));
        }
        tree.name.push_back(t);
      }
      tree.value.push_back(nodes_[k].value);
      auto b = kids.begin() + first[k], e = kids.begin() + first[k + 1];
      std::sort(b, e, [&](uint32_t x, uint32_t y) {
        return classes_[nodes_[y].cls].label < classes_[nodes_[x].cls].label;  // pushed last-first
      });
      for (auto it = b; it != e; ++it) todo.emplace_back(*it, id);
    }
    return tree;
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX, kAsTexts = UINT32_MAX - 1;
  // Names by their text: a frame's label and a text that spell the same
  // are one class (one node under a parent), as in the folded text.
  struct Class {
    Label label;
    int32_t frame = -1;  // a frame of this label, else the text
    StrId text = 0;
  };

  uint32_t class_of(const Label& label, int32_t frame, StrId text) {
    auto [it, added] = class_index_.try_emplace(label, static_cast<uint32_t>(classes_.size()));
    if (added) classes_.push_back({label, frame, text});
    return it->second;
  }
  uint32_t literal(std::string_view s) {
    StrId id = texts_.intern(s);
    if (id >= literal_class_.size()) literal_class_.resize(id + 1, kNone);
    uint32_t& c = literal_class_[id];
    if (c == kNone) c = class_of(Label().add(texts_.get(id)), -1, id);
    return c;
  }
  template <class Descend>
  void frame(FrameId f, Descend& descend) {
    uint32_t& c = frame_class_[f];
    if (c == kNone) {
      const Frame& fr = frames_.snapshot().frames.frame(f);
      // A label holding ';' is several names in the folded text, and a line
      // the page's numbers cannot hold exactly is kept as text: names.
      constexpr int64_t kExact = int64_t{1} << 53;
      if (frames_.label_has_semicolon(f) || fr.line >= kExact || fr.line <= -kExact) {
        c = kAsTexts;
        std::string text = frames_.label(f).text(SIZE_MAX);
        std::vector<uint32_t>& parts = as_texts_[f];
        for (size_t b = 0;;) {
          size_t e = text.find(';', b);
          parts.push_back(
              literal(std::string_view(text).substr(b, e == std::string::npos ? e : e - b)));
          if (e == std::string::npos) break;
          b = e + 1;
        }
      } else {
        c = class_of(frames_.label(f), static_cast<int32_t>(f), 0);
      }
    }
    if (c != kAsTexts) return descend(c);
    for (uint32_t part : as_texts_[f]) descend(part);
  }

  FoldedFrames frames_;
  StringTable texts_;
  std::vector<uint32_t> literal_class_;
  std::vector<uint32_t> frame_class_;
  std::unordered_map<FrameId, std::vector<uint32_t>> as_texts_;
  std::vector<Class> classes_;
  std::unordered_map<Label, uint32_t, Label::Hash> class_index_;
  std::vector<Node> nodes_;
  ChildIndex children_;
};

}  // namespace

FlameTree build_flame_tree(const Snapshot& snap, const Annotated& ann, size_t device,
                           bool segments) {
  TrieBuilder trie(snap);
  for (uint32_t si : ann.segments[device]) {
    const Segment& seg = snap.segments[si];
    std::string prefix = "stream_" + std::to_string(seg.stream);
    if (segments) prefix += ";seg_" + std::to_string(seg.address);
    for (const Block& b : snap.segment_blocks(seg)) {
      std::string head = prefix + ';' + std::string(snap.str(b.state_name));
      int64_t accounted;
      if (shape_has(snap, b.shape, Field::Frames)) {
        accounted = b.requested_size;
        trie.add(head, &b.stack, {}, accounted);
      } else {
        accounted = shape_has(snap, b.shape, Field::RequestedSize) ? b.requested_size : b.size;
        trie.add(head, nullptr, "<non-python>", accounted);
      }
      trie.add(head, nullptr, "<gaps>", b.size - accounted);
    }
  }
  return trie.finish();
}

}  // namespace memsight::report
