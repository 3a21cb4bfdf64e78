#pragma once
// Text escaping shared by every writer of JSON, SVG and HTML.

#include <string>
#include <string_view>

namespace memsight {

// Appends s as a JSON string literal. '<' is written as \u003c, so the text
// can sit inside an HTML <script> element ("</script>" never appears). Bytes
// that are not UTF-8 are escaped: a lone surrogate (as Python's pickle
// writes it) as its \udxxx escape, anything else as \ufffd.
void append_json_string(std::string& out, std::string_view s);

// Appends s with &, <, >, " and ' replaced by entities (XML and HTML text
// and attribute values).
void append_xml_escaped(std::string& out, std::string_view s);

}  // namespace memsight
