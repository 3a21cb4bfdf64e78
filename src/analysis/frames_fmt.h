#pragma once
// Frame text as torch's _memory_viz prints it: "file.py:12:func", outermost
// first, with interpreter and allocator plumbing filtered out.

#include <string>
#include <string_view>
#include <unordered_map>

#include "memsight/snapshot.h"

namespace memsight {

// torch's _frame_filter: true when the frame is kept.
bool keep_frame(std::string_view name, std::string_view filename);
// "basename:line:name".
void append_frame(std::string& out, std::string_view name, std::string_view filename,
                  std::string_view line);

// Caches the folded fragment ("a.py:1:f;b.py:2:g") of each stack.
class StackFormatter {
 public:
  explicit StackFormatter(const Snapshot& snap) : snap_(snap) {}
  // The frames joined by ';', outermost first, filtered; "<non-python>" for
  // an empty stack.
  const std::string& fragment(StackId s);

 private:
  const Snapshot& snap_;
  std::unordered_map<StackId, std::string> cache_;
};

}  // namespace memsight
