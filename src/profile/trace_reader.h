#pragma once
// Test and tuning hook of the trace reader: how many parts of event lists
// were read by helper threads and taken (see read_events in trace_reader.cpp).
#include <atomic>
#include <cstdint>

namespace memsight::profile_stats {
extern std::atomic<uint64_t> parts_taken;
}  // namespace memsight::profile_stats
