#include "memsight/input_limits.h"

#include <algorithm>
#include <charconv>

#include "util/escape.h"
#include "util/json_writer.h"

namespace memsight {

namespace {
constexpr std::string_view kCutMark = "\xE2\x80\xA6 [cut at ";  // "… [cut at "
constexpr size_t kNoteRoom = 40;  // "… [cut at 16384 of 104857606 bytes]" and some
}  // namespace

std::string cut_name(std::string_view s, size_t limit) {
  std::string out;
  append_cut_name(out, s, limit);
  return out;
}

void append_cut_name(std::string& out, std::string_view s, size_t limit) {
  // Within a note's length of the limit a cut would not shorten the text.
  if (s.size() <= limit || s.size() - limit <= kNoteRoom) {  // (limit may be SIZE_MAX)
    out += s;
    return;
  }
  // A name cut before ("… [cut at N of M bytes]") is cut again with its
  // first length kept: M is how long the name was in the file.
  // The note is at most 64 bytes: only the tail is searched (a 100 MiB name
  // can be shown in many places).
  uint64_t total = s.size();
  const size_t tail = s.size() - std::min<size_t>(s.size(), 64);
  if (size_t at = s.ends_with(" bytes]") ? s.substr(tail).rfind(kCutMark) : std::string_view::npos;
      at != std::string_view::npos) {
    at += tail;
    std::string_view note = s.substr(at + kCutMark.size());
    if (size_t of = note.find(" of "); of != std::string_view::npos) {
      uint64_t m = 0;
      auto digits = note.substr(of + 4, note.size() - of - 4 - 7);
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), m);
      if (ec == std::errc() && p == digits.data() + digits.size()) {
        total = m;
        s = s.substr(0, at);
        limit = std::min(limit, s.size());
      }
    }
  }
  size_t end = limit;
  // Back to the first byte of a UTF-8 sequence, so no character is split.
  while (end > 0 && end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  out += s.substr(0, end);
  out += kCutMark;
  out += std::to_string(end) + " of " + std::to_string(total) + " bytes]";
}

void InputNotes::add(const InputReason& r, uint64_t n) {
  if (n == 0) return;
  for (Note& note : notes_)
    if (note.reason == &r) {
      note.count += n;
      return;
    }
  notes_.push_back({&r, n});
}

void InputNotes::merge(const InputNotes& other) {
  for (const Note& n : other.notes_) add(*n.reason, n.count);
}

std::vector<std::string> InputNotes::lines() const {
  std::vector<std::string> out;
  for (const Note& n : notes_) {
    std::string line = std::to_string(n.count) + " ";
    line += n.count == 1 ? n.reason->one : n.reason->many;
    line += ' ';
    line += n.reason->why;
    out.push_back(std::move(line));
  }
  return out;
}

std::string InputNotes::text(std::string_view prefix) const {
  std::string out;
  for (const std::string& line : lines()) {
    out += prefix;
    out += line;
    out += '\n';
  }
  return out;
}

void InputNotes::json(JsonWriter& w) const {
  std::vector<std::string> text = lines();
  w.begin_array();
  for (size_t i = 0; i < notes_.size(); ++i)
    w.begin_object().field("count", notes_[i].count).field("note", text[i]).end_object();
  w.end_array();
}

}  // namespace memsight
