#pragma once
// Text escaping shared by every writer of JSON, SVG and HTML.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace memsight {

// Appends code point cp as UTF-8 (surrogates too, as Python's
// surrogatepass does: the readers decide what they accept).
void append_utf8(std::string& out, uint32_t cp);

// Appends s as a JSON string literal. '<' is written as \u003c, so the text
// can sit inside an HTML <script> element ("</script>" never appears). Bytes
// that are not UTF-8 are escaped: a lone surrogate (as Python's pickle
// writes it) as its \udxxx escape, anything else as \ufffd.
void append_json_string(std::string& out, std::string_view s);

// The length of the well-formed UTF-8 sequence at s[i], 0 if there is none.
// A surrogate's 3-byte form (how Python's pickle writes a lone surrogate,
// with "surrogatepass") counts as well-formed, its code point returned in
// `surrogate` (else 0).
size_t utf8_length(std::string_view s, size_t i, uint32_t& surrogate);
// True when s is UTF-8; with `surrogates`, the 3-byte forms of lone
// surrogates count too.
bool is_utf8(std::string_view s, bool surrogates);
// True when s is text Python's pickle could have written: UTF-8, lone
// surrogates allowed.
bool is_pickle_text(std::string_view s);

// Appends s with &, <, >, " and ' replaced by entities (XML and HTML text
// and attribute values).
void append_xml_escaped(std::string& out, std::string_view s);

// A link from a page to a file beside it: "./" and the path's segments,
// each percent-encoded but for letters, digits and "-._~". However the
// names read ("javascript:...", "a b", "?#"), the result is a relative path
// that names them: it cannot start a scheme, a query or a fragment.
std::string relative_href(std::initializer_list<std::string_view> segments);

}  // namespace memsight
