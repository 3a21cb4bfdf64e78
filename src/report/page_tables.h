#pragma once
// The page's string, frame and stack tables (see docs/formats.md): only what
// the page refers to, renumbered densely.
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "memsight/frames.h"
#include "memsight/input_limits.h"
#include "memsight/snapshot.h"
#include "report/page_pack.h"

namespace memsight::report {

// The page's string, frame and stack tables: only what the page refers to,
// renumbered densely (0 is the empty string / the empty stack).
class PageTables {
  static constexpr uint32_t kUnset = std::numeric_limits<uint32_t>::max();

 public:
  PageTables(const PageTables&) = delete;  // the text index points back at it
  PageTables(const Snapshot& snap, const UserCode& user_code)
      : snap_(snap),
        kinds_(snap, user_code),
        str_map_(snap.strings.size(), kUnset),
        frame_map_(snap.frames.frame_count(), kUnset),
        stack_map_(snap.frames.stack_count(), kUnset) {
    text("");
    str_map_[0] = 0;
    stack_map_[0] = 0;
    stack_off_ = {0, 0};
  }

  uint32_t str(StrId id) {
    uint32_t& m = str_map_[id];
    if (m == kUnset) m = text(snap_.str(id));
    return m;
  }
  // Each distinct text is held once, in the blob (the index views it there).
  uint32_t text(std::string_view s) {
    // A page shows names, and cuts long ones for display: past kNameLimit,
    // the rest of a (say) 100 MB frame name would only weigh on the page.
    std::string cut;
    if (s.size() > kNameLimit) s = cut = cut_name(s);
    auto it = text_index_.find(s);
    if (it != text_index_.end()) return *it;
    auto id = static_cast<uint32_t>(off_.size());
    blob_ += s;
    off_.push_back(blob_.size());
    text_index_.insert(id);
    return id;
  }
  uint32_t stack(StackId id) {
    uint32_t& m = stack_map_[id];
    if (m != kUnset) return m;
    for (FrameId f : snap_.frames.stack(id)) stack_frames_.push_back(frame(f));
    stack_off_.push_back(stack_frames_.size());
    m = static_cast<uint32_t>(stack_off_.size() - 2);
    return m;
  }

  void pack(PagePacker& p) {
    p.u8("strings.blob", blob_);
    std::vector<int64_t> off(off_.begin(), off_.end());
    off.insert(off.begin(), 0);
    p.ints("strings.off", off);
    p.ints("frames.name", f_name_);
    p.ints("frames.file", f_file_);
    p.ints("frames.line", f_line_);
    p.ints("frames.fx", f_fx_);
    p.ints("frames.kind", f_kind_);
    p.ints("stacks.off", stack_off_);
    p.ints("stacks.frames", stack_frames_);
  }
  size_t strings() const { return off_.size(); }
  size_t frames() const { return f_name_.size(); }
  size_t stacks() const { return stack_off_.size() - 1; }

  // The page's id of a frame.
  uint32_t frame(FrameId id) {
    uint32_t& m = frame_map_[id];
    if (m != kUnset) return m;
    const Frame& f = snap_.frames.frame(id);
    m = static_cast<uint32_t>(f_name_.size());
    f_name_.push_back(str(f.name));
    f_file_.push_back(str(f.filename));
    f_line_.push_back(f.line);
    f_fx_.push_back(f.extra ? fx(snap_.frames.extras[f.extra - 1]) : 0);
    f_kind_.push_back(static_cast<int64_t>(kinds_.kind(id)));
    return m;
  }

 private:
  // The text id of a frame's FX lines. Frames whose fx_* values are the
  // same texts (one long name shared through the memo) share one lookup.
  uint32_t fx(const PyValue& d) {
    static constexpr const char* kKeys[] = {"fx_node_name", "fx_node_op", "fx_node_target",
                                            "fx_original_trace"};
    static const char absent = 0;
    std::array<const void*, 4> key{};
    for (size_t i = 0; i < 4; ++i) {
      const PyValue* v = d.get(kKeys[i]);
      if (v && v->kind != PyValue::Kind::Str) return text(fx_text(d));
      key[i] = !v ? &absent : v->s.empty() ? nullptr : v->s.identity();
    }
    auto [it, added] = fx_ids_.try_emplace(key, 0);
    if (added) it->second = text(fx_text(d));
    return it->second;
  }
  struct FxHash {
    size_t operator()(const std::array<const void*, 4>& k) const {
      size_t h = 0;
      for (const void* p : k) h = h * 1000003 ^ std::hash<const void*>()(p);
      return h;
    }
  };
  std::unordered_map<std::array<const void*, 4>, uint32_t, FxHash> fx_ids_;

  // MemoryViz's FX annotation lines of a frame that carries fx_* keys.
  static std::string fx_text(const PyValue& d) {
    auto s = [&](const char* k) -> std::string {
      const PyValue* v = d.get(k);
      if (!v) return "";
      return v->kind == PyValue::Kind::Str ? v->s.str() : py_repr(*v);
    };
    std::string out;
    if (d.get("fx_node_op") || d.get("fx_node_name") || d.get("fx_node_target"))
      out += "\n    >> FX: node=" + s("fx_node_name") + ", op=" + s("fx_node_op") +
             ", target=" + s("fx_node_target");
    if (const PyValue* t = d.get("fx_original_trace"); t && t->kind == PyValue::Kind::Str) {
      out += "\n    >> Original Model Code:";
      size_t b = 0;
      const std::string& tr = t->s;
      while (b < tr.size()) {
        size_t e = tr.find('\n', b);
        if (e == std::string::npos) e = tr.size();
        out += "\n      " + tr.substr(b, e - b);
        b = e + 1;
      }
    }
    return out;
  }

  const Snapshot& snap_;
  FrameClassifier kinds_;
  std::vector<uint32_t> str_map_, frame_map_, stack_map_;
  std::string blob_;
  std::vector<uint64_t> off_;
  std::string_view text_at(uint32_t id) const {
    uint64_t b = id ? off_[id - 1] : 0;
    return std::string_view(blob_).substr(b, off_[id] - b);
  }
  // Texts by id, looked up by their text.
  struct TextHash {
    using is_transparent = void;
    const PageTables* t;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
    size_t operator()(uint32_t id) const { return (*this)(t->text_at(id)); }
  };
  struct TextEq {
    using is_transparent = void;
    const PageTables* t;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return view(a) == view(b);
    }
    std::string_view view(std::string_view s) const { return s; }
    std::string_view view(uint32_t id) const { return t->text_at(id); }
  };
  std::unordered_set<uint32_t, TextHash, TextEq> text_index_{16, TextHash{this}, TextEq{this}};
  std::vector<int64_t> f_name_, f_file_, f_line_, f_fx_, f_kind_;
  std::vector<int64_t> stack_off_, stack_frames_;
};

}  // namespace memsight::report
