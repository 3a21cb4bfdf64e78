#pragma once
// A forward-only JSON reader over a byte source, for files far larger than
// memory should hold (torch.profiler Chrome traces run to gigabytes). It
// never builds a document: the caller walks objects and arrays key by key,
// reads the scalars it wants and skips the rest. Plain files are read in
// place from the mapping (pages behind the cursor are given back);
// compressed ones through a window that holds at most one value being read.
//
// Errors throw memsight::Error with the byte offset: "malformed JSON at byte
// 1834: expected ':'", "truncated JSON at byte ...".

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "input/source.h"

namespace memsight::json {

enum class Kind { Object, Array, String, Number, True, False, Null };

class Reader {
 public:
  explicit Reader(ByteSource& src);

  // The kind of the value at the cursor (after white space).
  Kind peek();
  // Objects: begin_object(), then next_key(k) until it returns false.
  void begin_object();
  bool next_key(std::string& key);
  // The same, the key as a view: into the input when it has no escapes,
  // else into a buffer of the reader's. Valid until the next call.
  bool next_key_view(std::string_view& key);
  // Arrays: begin_array(), then next_item() until it returns false.
  void begin_array();
  bool next_item();
  // Scalars. string() unescapes into `out`; number() parses a JSON number
  // (an integer exactly up to 2^53); boolean and null are checked.
  void string(std::string& out);
  // A string as a view (as next_key_view), valid until the next call.
  std::string_view string_view();
  double number();
  int64_t integer();  // a number that must be integral
  bool boolean();
  void null();
  // Skips the value at the cursor, whatever it is.
  void skip();
  // A scalar as its text (strings unescaped), or "" for null; skips
  // objects and arrays and returns "".
  void scalar_text(std::string& out);
  // At the end: only white space may follow.
  void finish();

  uint64_t offset() const { return base_ + pos_; }

  // Reading one big array of a mapped input on several threads (each with a
  // reader of its own over the same source): enter_array_at starts a reader
  // at an item's first byte inside the array, as if just after '[' or ',';
  // next_item_at is next_item that says where the item starts (npos at the
  // end of the array) without reading it; seek_item puts a reader inside the
  // array at another item's start; leave_array_at puts it just after the
  // array's ']'. Only for mapped input.
  void enter_array_at(size_t pos);
  size_t next_item_at();
  void seek_item(size_t pos);
  void leave_array_at(size_t pos);
  bool mapped() const { return mapped_; }
  std::string_view input() const { return data_; }

 private:
  // Skips white space; throws at the end of input.
  char peek_char() {
    while (pos_ < data_.size()) {
      char c = data_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c;
      ++pos_;
    }
    return peek_char_refill();
  }
  char peek_char_refill();
  bool before_item(char close);  // ',' handling; false at the closing bracket
  char next_char();              // consumes it
  bool fill(size_t need);        // makes `need` bytes available at pos_; false at the end
  [[noreturn]] void fail(const std::string& what) const;
  void check_utf8(std::string_view text, uint64_t at) const;
  void expect(char c);
  void literal(std::string_view word);
  void end_of_container(char close);

  ByteSource& src_;
  std::string_view data_;  // the mapping, or buf_
  std::string buf_;
  size_t pos_ = 0;
  uint64_t base_ = 0;  // offset of data_[0] in the input
  bool mapped_ = false, eof_ = false;
  std::string scratch_, key_;
  uint64_t released_ = 0;
  // Whether the container just opened has had an item (for ',' handling),
  // a bit per nesting level.
  uint64_t first_bits_ = 0;
  int depth_ = 0;
};

}  // namespace memsight::json
