// The pieces both page writers share (bundle.h).
#include "report/bundle.h"

#include "memsight/error.h"
#include "memsight/html.h"
#include "util/escape.h"
#include "util/lines.h"

namespace memsight {

std::string html_escape(std::string_view s) {
  std::string out;
  append_xml_escaped(out, s);
  return out;
}

namespace {

// Appends the modules `list` names (one file a line; "@other.txt" names the
// modules of another list there), their `import` statements (at the start of
// a line) dropped and `export` keywords removed.
void append_modules(std::string& out, std::string_view list) {
  for_each_line(list, [&](std::string_view name) {
    while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.remove_suffix(1);
    if (name.empty() || name[0] == '#') return;
    if (name[0] == '@') {  // "@other.txt": the modules of another list, here
      std::string_view inner = viewer_asset(name.substr(1));
      if (inner.empty()) throw Error("html: viewer asset missing: " + std::string(name.substr(1)));
      append_modules(out, inner);
      return;
    }
    std::string_view src = viewer_asset(name);
    if (src.empty()) throw Error("html: viewer asset missing: " + std::string(name));
    out += "// ---- ";
    out += name;
    out += '\n';
    bool in_import = false;  // inside a multi-line import { ... } from '...';
    for_each_line(src, [&](std::string_view line) {
      if (line.starts_with("import ") || in_import) {
        in_import = line.find(" from ") == std::string_view::npos && !line.starts_with("} from ");
        return;
      }
      if (line.starts_with("export default "))
        line.remove_prefix(15);
      else if (line.starts_with("export "))
        line.remove_prefix(7);
      out += line;
      out += '\n';
    });
  });
}
}  // namespace

// The viewer's modules as one classic script (the files are ES modules for
// node's test runner; a file:// page cannot load module files).
std::string bundle_js(std::string_view list_file) {
  std::string_view list = viewer_asset(list_file);
  if (list.empty()) throw Error("html: viewer assets missing (" + std::string(list_file) + ")");
  std::string out = "(() => {\n'use strict';\n";
  append_modules(out, list);
  out += "})();\n";
  return out;
}

std::string render_json_page(std::string_view page_asset, std::string_view bundle_list,
                             const std::string& title, const std::string& data) {
  std::string page(viewer_asset(page_asset));
  if (page.empty()) throw Error("html: viewer assets missing (" + std::string(page_asset) + ")");
  std::string js = bundle_js(bundle_list);
  replace_all(js, "</script", "<\\/script");
  replace_all(page, "{{TITLE}}", html_escape(title));
  size_t data_at = page.find("/*{{DATA}}*/");
  size_t js_at = page.find("/*{{JS}}*/");
  if (data_at == std::string::npos || js_at == std::string::npos || data_at > js_at)
    throw Error("html: " + std::string(page_asset) + " lacks its {{DATA}} or {{JS}} marker");
  std::string out = page.substr(0, data_at);
  out += data;
  out.append(page, data_at + 12, js_at - data_at - 12);
  out += js;
  out.append(page, js_at + 10, std::string::npos);
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

}  // namespace memsight
