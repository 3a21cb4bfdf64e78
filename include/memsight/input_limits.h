#pragma once
// What memsight takes from the numbers and names of a file, one rule for
// every reader (torch.profiler traces, memory timelines, the snapshot page):
// a value outside its range drops the record that holds it, a name longer
// than kNameLimit is cut, and each reader counts what it dropped, by reason,
// so that every output (text, JSON, page) says it once.
//
// Why 2^53: byte counts and times within it are exact in a double and in
// the page's JavaScript, and it is far above anything real (8 PiB of memory;
// 285 years in microseconds, where clocks that count from 1970 are at
// about 2^50.6).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memsight {

class JsonWriter;  // util/json_writer.h

inline constexpr double kNumberLimit = 9007199254740992.0;  // 2^53

// A size or an allocator total: an integer in [0, 2^53).
inline bool byte_count_ok(double v) {
  return v >= 0 && v < kNumberLimit && v == static_cast<double>(static_cast<int64_t>(v));
}
// A signed change of bytes (a free is negative): an integer in (-2^53, 2^53).
inline bool byte_change_ok(double v) {
  return v > -kNumberLimit && v < kNumberLimit && v == static_cast<double>(static_cast<int64_t>(v));
}
// A point in time, in µs on any clock: a finite number in (-2^53, 2^53).
inline bool time_ok(double us) { return us > -kNumberLimit && us < kNumberLimit; }
// A duration in µs: in [0, 2^53).
inline bool duration_ok(double us) { return us >= 0 && us < kNumberLimit; }

// a + b, held at INT64_MAX / INT64_MIN where it would overflow: sums of
// many byte counts in range can still pass 2^63.
inline int64_t add_saturated(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

// Names (ops, kernels, Python functions, frames) longer than this are cut
// where they are read for a report or a page: real names stay far below it
// (long C++ template kernels run to a few KiB), and a 100 MB name must not
// be repeated whole in every row and table that shows it.
inline constexpr size_t kNameLimit = 16384;

// `s` when it is at most 40 bytes past `limit` (a cut would not shorten
// it), else its first `limit` bytes (back to a UTF-8 boundary) and
// "… [cut at LIMIT of N bytes]", which says how long it was.
std::string cut_name(std::string_view s, size_t limit = kNameLimit);
// The same, appended to `out` (no copy of a long `s`).
void append_cut_name(std::string& out, std::string_view s, size_t limit = kNameLimit);

// Why a record was dropped or a value changed: the thing counted, in the
// singular and the plural, and the reason ("[memory] event", "[memory]
// events", "dropped: a byte count outside 0..2^53 (8 PiB)").
struct InputReason {
  std::string_view one, many, why;
};

// What a reader dropped or changed, by reason, with counts.
class InputNotes {
 public:
  void add(const InputReason& r, uint64_t n = 1);
  void merge(const InputNotes& other);
  bool empty() const { return notes_.empty(); }
  // One sentence per reason: "2 [memory] events dropped: a byte count ...".
  std::vector<std::string> lines() const;
  // Lines "PREFIXsentence\n".
  std::string text(std::string_view prefix) const;
  // [{"count":2,"note":"2 [memory] events dropped: ..."}, ...]
  void json(JsonWriter& w) const;

 private:
  struct Note {
    const InputReason* reason;
    uint64_t count;
  };
  std::vector<Note> notes_;
};

}  // namespace memsight
