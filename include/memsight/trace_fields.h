#pragma once
// The fields of a trace entry, written once. Everything that knows a trace
// entry's keys is derived from this table: the model's Field values and
// TraceTable columns (snapshot.h), the reader's key recognition, the row
// lane's keys and per-entry decoder (pickle/), the writer, the Python values
// and the model built from the native dumper's arrays. A field added here
// is read, kept, written and converted everywhere at once.
//
// X(Name, key, column, Kind):
//   Name    Field::Name in the model, kRowName in the row lane
//   key     the dict key torch writes
//   column  the TraceTable column that holds it (and TraceEntry's member)
//   Kind    what the value is (TraceKind): Action, a str kept as an Action
//           (with its text when it is no known one); Int, an int that fits
//           in 64 bits; Str, an interned str; Stack, a list of frames,
//           interned as a stack
//
// The order is torch's own key order for an entry, which the model built
// from the dumper's arrays follows (from_raw.cpp).

#include <cstddef>
#include <iterator>
#include <string_view>

#define MEMSIGHT_TRACE_FIELDS(X)                             \
  X(Action, "action", action, Action)                        \
  X(Addr, "addr", addr, Int)                                 \
  X(Size, "size", size, Int)                                 \
  X(Stream, "stream", stream, Int)                           \
  X(TimeUs, "time_us", time_us, Int)                         \
  X(CompileContext, "compile_context", compile_context, Str) \
  X(UserMetadata, "user_metadata", user_metadata, Str)       \
  X(Frames, "frames", stack, Stack)

namespace memsight {

enum class TraceKind : unsigned char { Action, Int, Str, Stack };

// An oom entry writes its Addr under this key: the device's free bytes then.
inline constexpr std::string_view kDeviceFreeKey = "device_free";

// The keys, in the table's order.
inline constexpr std::string_view kTraceKeys[] = {
#define MEMSIGHT_TRACE_KEY(Name, key, column, Kind) key,
    MEMSIGHT_TRACE_FIELDS(MEMSIGHT_TRACE_KEY)
#undef MEMSIGHT_TRACE_KEY
};
inline constexpr size_t kTraceFieldCount = std::size(kTraceKeys);

}  // namespace memsight
