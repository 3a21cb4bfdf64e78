#pragma once
// Text written into the flamegraph SVG: integers, fixed-point numbers and
// sizes formatted the same on every machine (no locale), and frame names
// made valid XML text.
#include <cstdint>
#include <string>
#include <string_view>

namespace memsight::flame {

void append_uint(std::string& out, uint64_t v);

// Locale-independent "%.{prec}f" (to_chars rounds like printf in the "C" locale).
void append_fixed(std::string& out, double v, int prec);

// 402653184 -> "402,653,184"
std::string with_commas(uint64_t v);

// torch.cuda._memory_viz._format_size, exactly.
std::string torch_format_size(double num);

// Frame names are arbitrary bytes. XML 1.0 allows only valid UTF-8 and no control characters
// but tab/CR/LF, so anything else becomes U+FFFD; the result is still unescaped. Returns the
// number of code points through `cps`.
std::string clean_utf8(std::string_view s, size_t* cps);

}  // namespace memsight::flame
