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
#include <utility>
#include <variant>
#include <vector>

namespace memsight::report {

class PagePacker {
 public:
  // Integer column in the smallest of the encodings above (f64 keeps
  // integers exact below 2^53), read in place whatever the integer type.
  template <class T>
  void ints(const std::string& name, std::span<const T> v);
  void ints(const std::string& name, const std::vector<int64_t>& v) {
    ints(name, std::span<const int64_t>(v));
  }
  template <class T>
  void ints_of(const std::string& name, const std::vector<T>& v) {
    ints(name, std::span<const T>(v));
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
  // How a column is stored: its header entry's items (type names and numbers).
  using Spec = std::vector<std::variant<std::string_view, int64_t>>;
  size_t store(std::string bytes);  // returns the column's offset
  void add(const std::string& name, const char* type, size_t count, std::string bytes);
  // Appends one array; returns its type and offset for a header entry.
  template <class T>
  Spec column(std::string_view type, std::span<const T> v);
  void entry(const std::string& name, Spec spec) { entries_.emplace_back(name, std::move(spec)); }
  std::vector<std::pair<std::string, Spec>> entries_;  // the header's columns, in order
  std::vector<std::string> data_;
  std::function<void(std::string_view)> sink_;
  size_t offset_ = 0;
};

// The columns of every packed device: column NAME of all of them is one page
// column "dev.NAME" (the devices' parts one after another, in the order of
// meta.devices), and "dev.len.NAME" holds each device's part's length. A
// page of 100,000 devices then has some 120 columns, not 6 million, and the
// lengths (mostly alike) pack to a few bytes a device. With one device the
// columns go to the packer as they come.
class DeviceColumns {
 public:
  DeviceColumns(PagePacker& packer, size_t devices) : packer_(packer), direct_(devices <= 1) {}
  void begin_device();
  void ints(const std::string& name, std::vector<int64_t> v);
  template <class T>
  void ints_of(const std::string& name, const std::vector<T>& v) {
    if (direct_)
      packer_.ints_of("dev." + name, v), column(name, false, v.size());
    else
      ints(name, std::vector<int64_t>(v.begin(), v.end()));
  }
  void f64(const std::string& name, std::vector<double> v);
  // Packs what was gathered, and the lengths.
  void finish();

 private:
  struct Column {
    std::string name;
    bool real = false;
    std::vector<int64_t> ints;  // the values of the devices so far (not kept when direct)
    std::vector<double> reals;
    std::vector<uint32_t> lengths;  // of each device's part
  };
  Column& column(const std::string& name, bool real, size_t n);
  template <class T>
  void put(const std::string& name, std::vector<T> v);
  PagePacker& packer_;
  bool direct_;
  size_t devices_ = 0;
  size_t next_ = 0;  // the column the device packs next (devices pack alike)
  std::vector<Column> columns_;
};

// zlib-wrapped deflate (what DecompressionStream("deflate") reads), split in
// up to `parts` independently compressed pieces so they compress in
// parallel; the base64 of each piece, joined by '.'.
std::string deflate_base64(std::string_view raw, int parts, int level = 1);
std::string base64(std::string_view raw);

}  // namespace memsight::report
