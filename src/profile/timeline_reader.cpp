// read_memory_timeline: torch's categorised memory timeline
// (export_memory_timeline's coalesced [times, sizes] or raw records), every
// number checked by memsight's rule (memsight/input_limits.h): what is
// dropped, reordered or drawn differently is counted in MemoryTimeline::notes.
#include <algorithm>
#include <cmath>

#include "input/input_kind.h"
#include "input/json_stream.h"
#include "input/source.h"
#include "memsight/error.h"
#include "memsight/input_limits.h"
#include "memsight/profile.h"

namespace memsight {

namespace {

// Records of a memory timeline dropped or reordered (memsight/input_limits.h).
constexpr InputReason kBadRowTime{
    "time point", "time points",
    "dropped: a time that is not a number of magnitude below 2^53 \xC2\xB5s"};
constexpr InputReason kBadRecordTime{
    "record", "records", "dropped: a time that is not a number of magnitude below 2^53 \xC2\xB5s"};
constexpr InputReason kBadRowSize{
    "time point", "time points",
    "dropped: a category size that is not an integer in 0..2^53 (8 PiB)"};
constexpr InputReason kBadRecordBytes{
    "record", "records", "dropped: a byte count that is not an integer of magnitude below 2^53"};
constexpr InputReason kBadRecordCategory{"record", "records",
                                         "dropped: a category that is not one of 0..7"};
constexpr InputReason kUnsortedRows{"time point", "time points",
                                    "out of time order in the file: put in order"};
constexpr InputReason kUnsortedRecords{"record", "records",
                                       "out of time order in the file: put in order"};
constexpr InputReason kBelowZero{"time point", "time points",
                                 "with a category below zero bytes (more freed than was "
                                 "allocated): drawn as 0"};
constexpr InputReason kAboveLimit{"time point", "time points",
                                  "with a category of 2^53 bytes or more (the records add up past "
                                  "it): drawn at 2^53"};

// A number of the file, or NaN for anything else (which no range accepts).
double any_number(json::Reader& r) {
  if (r.peek() == json::Kind::Number) return r.number();
  r.skip();
  return std::nan("");
}

[[noreturn]] void not_a_timeline() {
  throw Error(
      "not a torch memory timeline (export_memory_timeline's .json, .json.gz or .raw.json.gz)");
}

// The file as read: either [times, [[9 sizes], ...]] (lists: the times and
// an empty list; sizes: the rows) or [[t_ns, action, bytes, category], ...]
// (lists: the records; sizes: none).
struct TimelineLists {
  std::vector<std::vector<double>> lists;
  std::vector<std::vector<double>> sizes;
};

TimelineLists read_lists(ByteSource& src) {
  json::Reader r(src);
  TimelineLists out;
  if (r.peek() != json::Kind::Array) not_a_timeline();
  r.begin_array();
  while (r.next_item()) {
    if (r.peek() != json::Kind::Array) not_a_timeline();
    r.begin_array();
    std::vector<double> nums;
    while (r.next_item()) {
      if (r.peek() == json::Kind::Array) {
        std::vector<double> row;
        r.begin_array();
        while (r.next_item()) row.push_back(any_number(r));
        if (row.size() != 9) throw Error("memory timeline: a row of sizes does not hold 9 values");
        out.sizes.push_back(std::move(row));
      } else {
        nums.push_back(any_number(r));
      }
    }
    out.lists.push_back(std::move(nums));
  }
  r.finish();
  return out;
}

// Puts the kept rows in time order (a stable sort: rows of one time keep
// theirs), counting those that were out of it.
void in_time_order(std::vector<std::pair<double, size_t>>& rows, const InputReason& reason,
                   MemoryTimeline& t) {
  uint64_t late = 0;
  for (size_t i = 1; i < rows.size(); ++i) late += rows[i].first < rows[i - 1].first;
  if (late)
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  t.notes.add(reason, late);
}

bool is_sizes(const TimelineLists& in) {
  return !in.sizes.empty() || (in.lists.size() == 2 && in.lists[0].empty() && in.lists[1].empty());
}

// [times, [[9 sizes], ...]]: one time point per row.
void from_sizes(const TimelineLists& in, MemoryTimeline& t) {
  const auto& [lists, sizes] = in;
  if (lists.size() != 2 || lists[0].size() != sizes.size() || !lists[1].empty()) not_a_timeline();
  std::vector<std::pair<double, size_t>> rows;  // (time, row)
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!time_ok(lists[0][i])) {
      t.notes.add(kBadRowTime);
      continue;
    }
    bool ok = true;
    for (double v : sizes[i]) ok = ok && byte_count_ok(v);
    if (!ok) {
      t.notes.add(kBadRowSize);
      continue;
    }
    rows.emplace_back(lists[0][i], i);
  }
  in_time_order(rows, kUnsortedRows, t);
  for (auto [ts, i] : rows) {
    t.ts.push_back(ts);
    for (size_t c = 0; c < 8; ++c) t.bytes[c].push_back(static_cast<int64_t>(sizes[i][c + 1]));
  }
}

// The raw records kept, as (time in ns, record), in time order; memory that
// existed before the profile (t < 0: torch writes -1) counts from the first
// time.
std::vector<std::pair<double, size_t>> kept_records(const std::vector<std::vector<double>>& lists,
                                                    MemoryTimeline& t) {
  for (const auto& rec : lists)
    if (rec.size() != 4) not_a_timeline();
  double t_first = -1;
  std::vector<std::pair<double, size_t>> recs;
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& rec = lists[i];
    if (!time_ok(rec[0] / 1000)) {
      t.notes.add(kBadRecordTime);
      continue;
    }
    if (!byte_change_ok(rec[2])) {
      t.notes.add(kBadRecordBytes);
      continue;
    }
    if (!(rec[3] >= 0 && rec[3] <= 7 && rec[3] == std::floor(rec[3]))) {
      t.notes.add(kBadRecordCategory);
      continue;
    }
    if (rec[0] >= 0 && (t_first < 0 || rec[0] < t_first)) t_first = rec[0];
    recs.emplace_back(rec[0], i);
  }
  for (auto& [when, i] : recs)
    if (when < 0) when = std::max(0.0, t_first);
  in_time_order(recs, kUnsortedRecords, t);
  return recs;
}

// Raw records: bytes per category added up, one row per distinct time.
void from_records(const std::vector<std::vector<double>>& lists, MemoryTimeline& t) {
  const std::vector<std::pair<double, size_t>> recs = kept_records(lists, t);
  int64_t cur[8] = {};
  uint64_t below_zero = 0, above_limit = 0;
  constexpr auto kMaxBytes = static_cast<int64_t>(kNumberLimit);
  for (size_t k = 0; k < recs.size(); ++k) {
    const auto& rec = lists[recs[k].second];
    int64_t& c = cur[static_cast<size_t>(rec[3])];
    c = add_saturated(c, static_cast<int64_t>(rec[2]));
    if (k + 1 < recs.size() && recs[k + 1].first == recs[k].first) continue;
    t.ts.push_back(recs[k].first / 1000.0);
    bool below = false, above = false;
    for (size_t c = 0; c < 8; ++c) {
      below = below || cur[c] < 0;
      above = above || cur[c] >= kMaxBytes;
      t.bytes[c].push_back(std::clamp<int64_t>(cur[c], 0, kMaxBytes));
    }
    below_zero += below;
    above_limit += above;
  }
  t.notes.add(kBelowZero, below_zero);
  t.notes.add(kAboveLimit, above_limit);
}

MemoryTimeline read_timeline(ByteSource& src) {
  const TimelineLists in = read_lists(src);
  MemoryTimeline t;
  t.bytes.assign(8, {});
  if (is_sizes(in))
    from_sizes(in, t);
  else
    from_records(in.lists, t);
  return t;
}

}  // namespace

MemoryTimeline read_memory_timeline(const std::string& path) {
  return read_named(path,
                    [&] { return read_timeline(*open_input(path, InputKind::MemoryTimeline)); });
}

MemoryTimeline read_memory_timeline_bytes(std::string_view data) {
  auto src = memory_source(data);
  expect_input(src->head(), InputKind::MemoryTimeline, "");
  return read_timeline(*src);
}

}  // namespace memsight
