#pragma once
// Which frames of a stack mean something to the person reading it: one rule
// for every view (summary, page, OOM diagnosis, Python). A site is the
// innermost frame of the user's own code; stacks are shown user-first with
// library and native plumbing collapsed.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memsight/label.h"
#include "memsight/snapshot.h"

namespace memsight {

enum class FrameKind : uint8_t {
  User,      // Python code outside torch, the standard library and installed packages
  Library,   // Python code of torch, the standard library or an installed package
  Internal,  // allocator, dispatcher, autograd and interpreter plumbing; frames with no file
  Native,    // any other native frame (an extension's own C++/CUDA code)
};
std::string_view frame_kind_name(FrameKind k);  // "user", "library", "internal", "native"

// What counts as user code, beyond the default rule. Each pattern is matched
// as a substring of the frame's filename; "!PATTERN" takes matching frames
// out of user code (they count as library), a plain PATTERN puts matching
// Python frames in (e.g. "torch/nn/" to see which torch module allocated).
// Later patterns win over earlier ones.
struct UserCode {
  std::vector<std::string> patterns;
  static UserCode parse(std::string_view comma_separated);
};

FrameKind classify_frame(std::string_view name, std::string_view filename,
                         const UserCode& user_code = {});

// The frame that stands for a stack, innermost first: the innermost user
// frame, else the innermost library Python frame, else the innermost native
// frame outside the allocator and interpreter. -1 when there is none.
int site_index(std::span<const FrameKind> kinds_innermost_first);

// A stack user-first (innermost first in, as recorded): the site and up to
// max_frames-1 frames outward of the same or a more useful kind, then how
// many were hidden. "" when the stack has no site. label(i): frame i's text.
std::string describe_kinds(std::span<const FrameKind> kinds, size_t max_frames,
                           const std::function<std::string(size_t)>& label);

// "file.py:LINE:name" (the file's basename, as torch prints frames).
std::string frame_label(std::string_view name, std::string_view filename, int64_t line);

// The kind of every frame of snapshots by its label ("file.py:12:name", as
// frame_label writes it), for colouring flamegraphs. The labels view the
// snapshots' strings, unbuilt (one long file name may be in every frame):
// the snapshots must outlive it. The first frame of a label gives its kind.
class FrameLabelKinds {
 public:
  void add(const Snapshot& snap, const UserCode& user_code = {});
  // One label, copied (kinds kept after their snapshot is gone: memsight
  // diff's moments). The first kind given for a label stays.
  void add(std::string_view label, FrameKind kind);
  std::optional<FrameKind> find(std::string_view label) const;
  bool empty() const { return kinds_.empty() && owned_.empty(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(const Label& l) const { return l.hash(); }
    size_t operator()(std::string_view s) const { return Label::hash_text(s); }
  };
  struct Eq {
    using is_transparent = void;
    bool operator()(const Label& a, const Label& b) const { return a == b; }
    bool operator()(const Label& a, std::string_view b) const { return a.spells(b); }
    bool operator()(std::string_view a, const Label& b) const { return b.spells(a); }
  };
  std::unordered_map<Label, FrameKind, Hash, Eq> kinds_;
  std::unordered_map<std::string, FrameKind, Hash, std::equal_to<>> owned_;
};

// The rule over a snapshot's interned frames, cached per frame.
class FrameClassifier {
 public:
  explicit FrameClassifier(const Snapshot& snap, UserCode user_code = {});
  FrameKind kind(FrameId f) const;
  // The site frame of a stack, if it has one.
  std::optional<FrameId> site(StackId s) const;
  // The site's label; for a stack of native plumbing only, what it names
  // ("<backward: MmBackward0, op mm>"); "<no stack recorded>" for none.
  // site_key: unbuilt (sites are grouped by it); site_label: built, long
  // names cut (cut_name).
  Label site_key(StackId s) const;
  std::string site_label(StackId s) const { return site_key(s).text(); }
  // "file.py:LINE:name", unbuilt.
  Label frame_key(FrameId f) const;
  // The stack user-first: the site and up to max_frames-1 frames outward of
  // the same or a more useful kind, then how many frames were hidden:
  // "train.py:81:step <- train.py:120:main  [+6 library, +38 native frames]".
  // Long names are cut (cut_name).
  std::string describe(StackId s, size_t max_frames = 3) const;
  const Snapshot& snapshot() const { return snap_; }

 private:
  Label plumbing_label(StackId s) const;
  const Snapshot& snap_;
  UserCode user_code_;
  mutable std::vector<uint8_t> kinds_;  // FrameKind + 1; 0: not yet classified
  // What the rule found in each file name and function name (by string
  // id; 0: not yet looked at).
  mutable std::vector<uint8_t> file_bits_, name_bits_;
  // Each file's base name (where it starts, its hash) and each name's hash,
  // found once per string: labels of many frames share them.
  struct Base {
    size_t at;
    uint64_t hash;
  };
  mutable std::unordered_map<StrId, Base> base_;
  mutable std::unordered_map<StrId, uint64_t> name_hash_;
};

}  // namespace memsight
