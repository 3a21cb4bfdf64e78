#pragma once
// Doubles to and from text as <charconv> writes and reads them, also where
// <charconv> has integers only: emscripten's libc++ in Debian 12, which
// compiles the standalone viewer's engine. The *_fallback functions are what
// runs there; every build has them, so that tests hold them to <charconv>.
#include <string>
#include <string_view>

namespace memsight {

// True when all of `text` is one double in from_chars' general format (no
// leading space or '+', no hexadecimal) and in range.
bool parse_double(std::string_view text, double& out);
// The fewest digits that read back as v, as to_chars(v, scientific) writes
// them: "1.5e-07".
std::string shortest_scientific(double v);
// As to_chars(v): the shortest of fixed and scientific (fixed on a tie).
std::string shortest_text(double v);
// As to_chars(v, fixed, prec): printf's "%.{prec}f" in the "C" locale.
std::string fixed_text(double v, int prec);

bool parse_double_fallback(std::string_view text, double& out);
std::string shortest_scientific_fallback(double v);
std::string shortest_text_fallback(double v);
std::string fixed_text_fallback(double v, int prec);

}  // namespace memsight
