#pragma once
// How memsight's text reports write sizes, percents and counts, so that one
// value reads the same in every report (summary, diff, leaks, whatif, ranks,
// profile, the CLI's messages). torch's own text tools keep torch's size
// rule (format_size, memsight/text_tools.h) to match torch byte for byte.
#include <cstdint>
#include <string>
#include <string_view>

namespace memsight {

// "%.1f" and a binary unit: the unit changes at `next_at` of the one below.
// torch's rule changes it at 1024 ("1024.0GiB" for 1023.96 GiB); memsight's
// at 1023.95, where the value would round to 1024.0.
std::string binary_size(double bytes, double next_at);

// A size, the unit chosen after rounding: "0.0B", "976.6KiB", "1.0MiB"
// (from 1023.95 KiB up), "-2.0GiB". (Also declared in memsight/text_tools.h.)
std::string format_bytes(double bytes);
// A change in size: "+1.5MiB", "-976.6KiB", and "0" for none.
std::string signed_bytes(int64_t delta);

// A share as a percent with one decimal: 0.1234 -> "12.3%" (never "-0.0%").
std::string percent(double share);
// part of whole as a percent; "0.0%" when whole is not positive.
std::string percent(double part, double whole);
// A relative change with its sign: 0.05 -> "+5.0%", -0.5 -> "-50.0%".
std::string signed_percent(double change);
// A change between two shares in percentage points: "+1.5 pt", "0" for none.
std::string percent_points(double change);

// An integer with thousands separators: "999", "1,000", "-1,234,567".
std::string count_text(int64_t n);
// A count and its noun: "1 block", "2 blocks", "1,024 trace entries". The
// plural is the singular with an "s" unless given.
std::string count_of(int64_t n, std::string_view singular, std::string_view plural = {});

// A size as a user types it: digits and an optional binary unit ("512M",
// "8G", "80GiB", "1T", "4096" or "4096B" for bytes). False for anything
// else, for zero and past 2^64.
bool parse_size(std::string_view text, uint64_t& bytes);

}  // namespace memsight
