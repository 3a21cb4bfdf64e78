#pragma once
// Labels of frames and sites ("train.py:81:step") as the pieces they are
// made of, viewing the snapshot's interned strings. A snapshot may name one
// 100 MiB file in every frame through the pickle memo: the label of each
// frame is then compared, hashed and grouped without being built (each
// long name hashed once, by whoever owns it), and built only for what is
// shown, with long pieces cut (cut_name, memsight/input_limits.h).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "memsight/input_limits.h"

namespace memsight {

class Label {
 public:
  // Pieces must outlive the label (the snapshot's strings, literals).
  Label& add(std::string_view piece);
  // The same, with the piece's hash_text() known (its owner keeps it, so
  // a long name shared by many labels is hashed once).
  Label& add(std::string_view piece, uint64_t piece_hash);
  // A number, as decimal digits (a label holds at most one).
  Label& add(int64_t number);

  size_t size() const;
  bool empty() const { return size() == 0; }
  // The text, each piece cut at max_piece bytes (cut_name).
  std::string text(size_t max_piece = kNameLimit) const;
  void append_to(std::string& out, size_t max_piece = kNameLimit) const;
  // Compared as the text spelled, whatever the pieces.
  int compare(const Label& o) const;
  bool operator==(const Label& o) const { return compare(o) == 0; }
  // Whether the label spells exactly s.
  bool spells(std::string_view s) const;
  bool operator<(const Label& o) const { return compare(o) < 0; }

  // Hash of the text, whatever its pieces (a polynomial hash, so a label's
  // is combined from its pieces' without reading them again).
  size_t hash() const;
  static uint64_t hash_text(std::string_view s);
  struct Hash {
    size_t operator()(const Label& l) const { return l.hash(); }
  };

 private:
  static constexpr size_t kMaxPieces = 6;
  std::string_view piece(size_t i) const {
    return pieces_[i].data() ? pieces_[i] : std::string_view(digits_, digits_size_);
  }
  std::array<std::string_view, kMaxPieces> pieces_{};  // null data: the number
  std::array<uint64_t, kMaxPieces> hashes_{};          // where known_ says
  uint8_t known_ = 0;                                  // bit i: hashes_[i] is set
  uint8_t count_ = 0;
  uint8_t digits_size_ = 0;
  char digits_[24] = {};
};

}  // namespace memsight
