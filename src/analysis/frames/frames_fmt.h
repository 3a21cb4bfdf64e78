#pragma once
// Frame text as torch's _memory_viz prints it: "file.py:12:func", outermost
// first, with interpreter and allocator plumbing filtered out.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memsight/label.h"
#include "memsight/snapshot.h"

namespace memsight {

// torch's _frame_filter: true when the frame is kept.
bool keep_frame(std::string_view name, std::string_view filename);
// "basename:line:name", the base name and the name each cut at max_piece
// bytes (cut_name; torch's outputs keep them whole).
void append_frame(std::string& out, std::string_view name, std::string_view filename,
                  std::string_view line, size_t max_piece = SIZE_MAX);

// keep_frame over a snapshot's frames, and their folded labels: each name
// and file is looked at once, however many frames share it (a snapshot may
// name one 100 MiB file in every frame, through the pickle memo).
class FoldedFrames {
 public:
  explicit FoldedFrames(const Snapshot& snap)
      : snap_(snap), name_(snap.strings.size(), 0), file_(snap.strings.size(), 0) {}
  bool kept(FrameId f);
  // "basename:line:name", unbuilt (the base name after the last '/', as torch).
  Label label(FrameId f);
  // Whether the label holds a ';' (it then reads as several frames).
  bool label_has_semicolon(FrameId f);
  const Snapshot& snapshot() const { return snap_; }

 private:
  struct Base {
    size_t at;       // where the base name starts
    bool semicolon;  // the base name holds a ';'
    uint64_t hash;   // of the base name (Label::hash_text)
  };
  const Base& base(StrId file);
  const Snapshot& snap_;
  std::vector<uint8_t> name_, file_;  // bit 0: looked at, 1: dropped, 2: holds ';' (names)
  std::unordered_map<StrId, Base> base_;
  std::unordered_map<StrId, uint64_t> name_hash_;
};

// Writes the folded fragment ("a.py:1:f;b.py:2:g") of stacks, caching
// those up to 64 KiB (the output then holds a long one; a cache would hold
// it again). Names are whole, as torch writes them, or cut at max_piece
// bytes (memsight's own outputs: kNameLimit).
class StackFormatter {
 public:
  explicit StackFormatter(const Snapshot& snap, size_t max_piece = SIZE_MAX)
      : frames_(snap), max_piece_(max_piece) {}
  // Appends the frames joined by ';', outermost first, filtered;
  // "<non-python>" for an empty stack.
  void append(std::string& out, StackId s);

 private:
  static constexpr size_t kCacheMax = 64 << 10;
  FoldedFrames frames_;
  size_t max_piece_;
  std::unordered_map<StackId, std::string> cache_;
};

}  // namespace memsight
