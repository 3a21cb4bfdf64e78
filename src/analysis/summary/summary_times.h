#pragma once
// Devices alike but for when they ran (100,000 devices of one allocation
// each, each at its own time) are one group: their summaries are compared
// with each device's times counted from its first trace entry (the text
// counts from there too), and a group's member gets its own times back by
// the difference of the first entries.
#include <cstdint>

#include "memsight/snapshot.h"
#include "memsight/summary.h"

namespace memsight {

// The time of device d's first trace entry; 0 when it has none.
inline int64_t first_entry_time(const Snapshot& snap, size_t d) {
  if (d >= snap.device_count()) return 0;
  auto [begin, end] = snap.device_rows(d);
  return begin < end ? snap.trace.time_us[begin] : 0;
}

// Every time in `ds` moved by to - from microseconds, wrapping (a file's
// times are any int64, and a move there and back must give them back).
inline void shift_times(DeviceSummary& ds, int64_t from, int64_t to) {
  const uint64_t by = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  auto shift = [by](int64_t& t) { t = static_cast<int64_t>(static_cast<uint64_t>(t) + by); };
  // A peak before the first entry (event -1) has no time (0).
  if (ds.peak_allocated_event >= 0) shift(ds.peak_allocated_time_us);
  if (ds.peak_active_event >= 0) shift(ds.peak_active_time_us);
  if (ds.peak_reserved_event >= 0) shift(ds.peak_reserved_time_us);
  for (OomReport& o : ds.ooms) shift(o.time_us);
}

}  // namespace memsight
