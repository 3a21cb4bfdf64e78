#pragma once
// Packing of the report page's data: named little-endian columns in one
// blob, then deflate + base64 for embedding in HTML. Layout (docs/formats.md):
//
//   0        4        8                 8+H (padded to 8)
//   +--------+--------+-----------------+----------+----------+---
//   | "MSV1" | H (u32)| header JSON (H) | column 0 | column 1 | ...
//   +--------+--------+-----------------+----------+----------+---
//
// The header maps each column name to how it is stored:
//   [type, offset, count]                plain array (u8 i8 u16 i16 u32 i32 f64)
//   ["const", count, value]              every value the same; no bytes
//   ["dict", count, itype, ioff, vtype, voff, nvalues]
//                                        values[index[i]]: few distinct values
//   ["exc", count, type, off, "u32", ioff, "f64", voff, nexc]
//                                        narrow values; the type's top value marks
//                                        row ioff[k] whose value is voff[k]
// (offsets are relative to the first column) and carries the page's small
// metadata. Every array starts 8-byte aligned so the browser can view it as
// a typed array in place.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memsight::report {

class PagePacker {
 public:
  // Integer column in the smallest of the encodings above (f64 keeps
  // integers exact below 2^53).
  void ints(const std::string& name, std::span<const int64_t> v);
  template <class T>
  void ints_of(const std::string& name, const std::vector<T>& v) {
    std::vector<int64_t> w(v.begin(), v.end());
    ints(name, w);
  }
  void f64(const std::string& name, std::span<const double> v);
  void u8(const std::string& name, std::string_view bytes);

  // The blob: magic, header (the columns plus `meta_json`, an object) and
  // the column bytes; with a sink, only the magic and header.
  std::string finish(std::string_view meta_json);

  // Hands each column's bytes (padded) to `sink` as it is packed, in blob
  // order, instead of keeping them: the blob is then finish()'s result
  // followed by every piece the sink got.
  void set_sink(std::function<void(std::string_view)> sink) { sink_ = std::move(sink); }

 private:
  size_t store(std::string bytes);  // returns the column's offset
  void add(const std::string& name, const char* type, size_t count, std::string bytes);
  // Appends one array; returns its `"type",offset` for a header entry.
  std::string column(std::string_view type, std::span<const int64_t> v);
  void entry(const std::string& name, const std::string& spec);
  std::string header_;  // "name":[...], entries
  std::vector<std::string> data_;
  std::function<void(std::string_view)> sink_;
  size_t offset_ = 0;
};

// zlib-wrapped deflate (what DecompressionStream("deflate") reads), split in
// up to `parts` independently compressed pieces so they compress in
// parallel; the base64 of each piece, joined by '.'.
std::string deflate_base64(std::string_view raw, int parts, int level = 1);
std::string base64(std::string_view raw);

}  // namespace memsight::report
