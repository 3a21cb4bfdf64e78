#pragma once
// Pieces shared by the pages the engine writes (the snapshot page and the
// profiler pages): the viewer's modules as one classic script, and text
// splicing.
#include <string>
#include <string_view>

namespace memsight {

// viewer/src files listed in `list_file` (one name a line), as one script.
std::string bundle_js(std::string_view list_file);
// Replaces every `from` in s with `to`.
void replace_all(std::string& s, std::string_view from, std::string_view to);
std::string html_escape(std::string_view s);
// A page of viewer/src whose script reads its data as JSON: `page_asset`
// (with {{TITLE}}, /*{{DATA}}*/ and /*{{JS}}*/ markers) filled with the
// title, `data` and the modules `bundle_list` names.
std::string render_json_page(std::string_view page_asset, std::string_view bundle_list,
                             const std::string& title, const std::string& data);

}  // namespace memsight
