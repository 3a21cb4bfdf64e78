// The frame rule: user code, library Python, allocator/interpreter plumbing,
// other native code. See docs/summary.md ("Sites").
#include <algorithm>
#include <functional>

#include "memsight/frames.h"

namespace memsight {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool is_python_file(std::string_view file) {
  return file.ends_with(".py") || file.ends_with(".pyw") || file.starts_with("<");
}

bool is_library_python(std::string_view file) {
  // torch.profiler names torch's files relative to site-packages.
  if (file.starts_with("torch/")) return true;
  // torch.compile's generated code (inductor's cache) is torch's too.
  static constexpr std::string_view kParts[] = {
      "/site-packages/", "/dist-packages/", "/torch/", "\\site-packages\\", "\\torch\\",
      "/lib/python",     "/lib64/python",   "\\Lib\\", "/torchinductor_"};
  if (file.starts_with("<frozen") || file.starts_with("<eval_with_key>")) return true;
  return std::any_of(std::begin(kParts), std::end(kParts),
                     [&](std::string_view p) { return contains(file, p); });
}

// A namespace at the start of a qualified name, or of a word inside it
// ("std::vector<at::Tensor> at::native::f" names at::native::f).
bool names_namespace(std::string_view head, std::string_view ns) {
  for (size_t p = head.find(ns); p != std::string_view::npos; p = head.find(ns, p + 1)) {
    char before = p ? head[p - 1] : ' ';
    if (before == ' ' || before == '<' || before == ',' || before == '*' || before == '&')
      return true;
  }
  return false;
}

// Allocator, dispatcher and interpreter plumbing, by the function's name.
bool is_internal_name(std::string_view name) {
  std::string_view head = name.substr(0, name.find('('));
  static constexpr std::string_view kNamespaces[] = {
      "c10::", "at::", "torch::", "caffe2::", "pybind11::", "std::", "c10d::", "unwind::"};
  for (auto ns : kNamespaces)
    if (names_namespace(head, ns)) return true;
  static constexpr std::string_view kPrefixes[] = {"Py", "_Py", "THP", "__libc", "_start"};
  for (auto p : kPrefixes)
    if (head.starts_with(p)) return true;
  static constexpr std::string_view kNames[] = {"CapturedTraceback", "gather_with_cpp",
                                                "wrap_kernel_functor", "boxed_kernel"};
  for (auto n : kNames)
    if (contains(head, n)) return true;
  return false;
}

// ... and by its file.
bool is_internal_file(std::string_view file) {
  if (file.empty() || file == "??") return true;  // nothing a person could open
  static constexpr std::string_view kFiles[] = {
      "CUDACachingAllocator", "core/boxing",  "/Register",      "Register",
      "Redispatch",           "VariableType", "python_",        "ceval.c",
      "pythonrun.c",          "Objects/",     "Modules/main.c", "abstract.h",
      "memory_snapshot.cpp"};
  for (auto f : kFiles)
    if (contains(file, f)) return true;
  return false;
}

// What the rule reads from a file name, as bits (found once per file: one
// long name may be shared by every frame of a snapshot).
enum FileBits : uint8_t {
  kKnown = 1,
  kPython = 2,
  kLibrary = 4,
  kInternalFile = 8,
  // The --user-code patterns that match, in effect (later ones win): some
  // "PAT" puts the frame in user code; a "!PAT" after it takes it out
  // again; "!PAT" alone takes user code out.
  kUserIn = 16,
  kUserInThenOut = 32,
  kUserOut = 64,
};

uint8_t file_bits(std::string_view file, const UserCode& user_code) {
  uint8_t b = kKnown;
  if (is_python_file(file)) {
    b |= kPython;
    if (is_library_python(file)) b |= kLibrary;
  } else if (is_internal_file(file)) {
    b |= kInternalFile;
  }
  uint8_t effect = 0;
  for (const std::string& p : user_code.patterns) {
    bool narrow = p.starts_with('!');
    std::string_view pat = narrow ? std::string_view(p).substr(1) : std::string_view(p);
    if (!contains(file, pat)) continue;
    if (!narrow)
      effect = kUserIn;
    else
      effect = effect & (kUserIn | kUserInThenOut) ? kUserInThenOut : kUserOut;
  }
  return b | effect;
}

FrameKind kind_of(uint8_t file, bool internal_name) {
  FrameKind k;
  if (file & kPython)
    k = file & kLibrary ? FrameKind::Library : FrameKind::User;
  else
    k = (file & kInternalFile) || internal_name ? FrameKind::Internal : FrameKind::Native;
  if (file & kUserIn) return FrameKind::User;
  if (file & kUserInThenOut) return FrameKind::Library;
  if ((file & kUserOut) && k == FrameKind::User) return FrameKind::Library;
  return k;
}

}  // namespace

std::string_view frame_kind_name(FrameKind k) {
  switch (k) {
    case FrameKind::User:
      return "user";
    case FrameKind::Library:
      return "library";
    case FrameKind::Internal:
      return "internal";
    case FrameKind::Native:
      return "native";
  }
  return "native";
}

UserCode UserCode::parse(std::string_view list) {
  UserCode uc;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (!item.empty() && item != "!") uc.patterns.emplace_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return uc;
}

FrameKind classify_frame(std::string_view name, std::string_view filename,
                         const UserCode& user_code) {
  uint8_t file = file_bits(filename, user_code);
  return kind_of(file, !(file & kPython) && is_internal_name(name));
}

int site_index(std::span<const FrameKind> kinds) {
  for (FrameKind want : {FrameKind::User, FrameKind::Library, FrameKind::Native})
    for (size_t i = 0; i < kinds.size(); ++i)
      if (kinds[i] == want) return static_cast<int>(i);
  return -1;
}

std::string frame_label(std::string_view name, std::string_view filename, int64_t line) {
  auto slash = filename.find_last_of("/\\");
  std::string out(slash == std::string_view::npos ? filename : filename.substr(slash + 1));
  out += ':';
  out += std::to_string(line);
  out += ':';
  out += name;
  return out;
}

void FrameLabelKinds::add(const Snapshot& snap, const UserCode& user_code) {
  FrameClassifier fc(snap, user_code);
  for (FrameId f = 0; f < snap.frames.frame_count(); ++f)
    kinds_.try_emplace(fc.frame_key(f), fc.kind(f));
}

void FrameLabelKinds::add(std::string_view label, FrameKind kind) {
  if (!find(label)) owned_.emplace(std::string(label), kind);
}

std::optional<FrameKind> FrameLabelKinds::find(std::string_view label) const {
  if (auto it = kinds_.find(label); it != kinds_.end()) return it->second;
  if (auto it = owned_.find(label); it != owned_.end()) return it->second;
  return std::nullopt;
}

FrameClassifier::FrameClassifier(const Snapshot& snap, UserCode user_code)
    : snap_(snap),
      user_code_(std::move(user_code)),
      kinds_(snap.frames.frame_count(), 0),
      file_bits_(snap.strings.size(), 0),
      name_bits_(snap.strings.size(), 0) {}

FrameKind FrameClassifier::kind(FrameId f) const {
  uint8_t& k = kinds_[f];
  if (!k) {
    // The facts of each name and file are found once, however many frames
    // share them.
    const Frame& fr = snap_.frames.frame(f);
    uint8_t& file = file_bits_[fr.filename];
    if (!file) file = file_bits(snap_.str(fr.filename), user_code_);
    bool internal_name = false;
    if (!(file & kPython)) {
      uint8_t& name = name_bits_[fr.name];  // 1: plain, 2: plumbing
      if (!name) name = is_internal_name(snap_.str(fr.name)) ? 2 : 1;
      internal_name = name == 2;
    }
    k = static_cast<uint8_t>(kind_of(file, internal_name)) + 1;
  }
  return static_cast<FrameKind>(k - 1);
}

std::optional<FrameId> FrameClassifier::site(StackId s) const {
  auto frames = snap_.frames.stack(s);
  std::vector<FrameKind> kinds(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) kinds[i] = kind(frames[i]);
  int i = site_index(kinds);
  if (i < 0) return std::nullopt;
  return frames[static_cast<size_t>(i)];
}

// A stack of native plumbing only (the autograd engine's thread records no
// Python frames): named by the autograd node and the operator, innermost
// first, when the stack has them.
Label FrameClassifier::plumbing_label(StackId s) const {
  std::string_view node, op;
  for (FrameId id : snap_.frames.stack(s)) {
    std::string_view name = snap_.str(snap_.frames.frame(id).name);
    name = name.substr(0, name.find('('));
    constexpr std::string_view kOp = "at::_ops::", kNode = "torch::autograd::generated::";
    if (size_t p = name.find(kOp); op.empty() && p != std::string_view::npos) {
      std::string_view rest = name.substr(p + kOp.size());
      op = rest.substr(0, rest.find("::"));
    }
    if (size_t p = name.find(kNode); node.empty() && p != std::string_view::npos) {
      std::string_view rest = name.substr(p + kNode.size());
      rest = rest.substr(0, rest.find("::"));
      if (rest.ends_with("_apply_functional")) rest.remove_suffix(17);
      if (rest != "details") node = rest;  // helpers: the node is further out
    }
  }
  Label l;
  if (!node.empty()) {
    l.add("<backward: ").add(node);
    if (!op.empty()) l.add(", op ").add(op);
    return l.add(">");
  }
  if (!op.empty()) return l.add("<op ").add(op).add(", no Python frames>");
  return l.add("<only allocator and interpreter frames>");
}

Label FrameClassifier::frame_key(FrameId f) const {
  const Frame& fr = snap_.frames.frame(f);
  std::string_view file = snap_.str(fr.filename), name = snap_.str(fr.name);
  auto [base, added] = base_.try_emplace(fr.filename, Base{0, 0});
  if (added) {
    auto slash = file.find_last_of("/\\");
    base->second.at = slash == std::string_view::npos ? 0 : slash + 1;
    base->second.hash = Label::hash_text(file.substr(base->second.at));
  }
  auto [nh, named] = name_hash_.try_emplace(fr.name, 0);
  if (named) nh->second = Label::hash_text(name);
  Label l;
  return l.add(file.substr(base->second.at), base->second.hash)
      .add(":")
      .add(fr.line)
      .add(":")
      .add(name, nh->second);
}

Label FrameClassifier::site_key(StackId s) const {
  if (snap_.frames.stack(s).empty()) return Label().add("<no stack recorded>");
  auto f = site(s);
  return f ? frame_key(*f) : plumbing_label(s);
}

std::string FrameClassifier::describe(StackId s, size_t max_frames) const {
  auto frames = snap_.frames.stack(s);
  std::vector<FrameKind> kinds(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) kinds[i] = kind(frames[i]);
  if (site_index(kinds) < 0) return site_label(s);
  return describe_kinds(kinds, max_frames, [&](size_t i) { return frame_key(frames[i]).text(); });
}

std::string describe_kinds(std::span<const FrameKind> kinds, size_t max_frames,
                           const std::function<std::string(size_t)>& label) {
  int site = site_index(kinds);
  if (site < 0) return "";
  FrameKind site_kind = kinds[static_cast<size_t>(site)];
  // Outward from the site: frames as useful as the site (user frames stay
  // user; a library site shows library and user frames).
  auto shows = [&](FrameKind k) {
    return k == site_kind || (site_kind != FrameKind::User && k == FrameKind::User) ||
           (site_kind == FrameKind::Native && k == FrameKind::Library);
  };
  std::string out;
  size_t shown = 0, python = 0, native = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    FrameKind k = kinds[i];
    if (i >= static_cast<size_t>(site) && shown < max_frames && shows(k)) {
      if (shown++) out += " <- ";
      out += label(i);
      continue;
    }
    (k == FrameKind::User || k == FrameKind::Library ? python : native)++;
  }
  if (python + native) {
    out += "  [+";
    if (python) out += std::to_string(python) + " Python";
    if (python && native) out += ", +";
    if (native) out += std::to_string(native) + " native";
    out += python + native == 1 ? " frame]" : " frames]";
  }
  return out;
}

}  // namespace memsight
