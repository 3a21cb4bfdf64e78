// render_html: the page's data (page_blob.cpp), compressed and poured into
// the viewer's template with the viewer's CSS and JavaScript (viewer/src,
// embedded at build time).
#include "memsight/html.h"

#include <string>

#include "memsight/error.h"
#include "report/bundle.h"
#include "report/page_pack.h"
#include "report/phase_timer.h"

namespace memsight {

using report::PhaseTimer;

std::string render_html(const Snapshot& snap, const HtmlOptions& opts) {
  std::string title = opts.title.empty() ? "memsight" : opts.title;
  std::string raw = render_page_data(snap, opts);
  PhaseTimer phase;
  std::string payload = opts.compress ? report::deflate_base64(raw, 4) : report::base64(raw);
  phase("compress");

  std::string page(viewer_asset("page.html"));
  if (page.empty()) throw Error("html: viewer assets missing (page.html)");
  std::string js = bundle_js("bundle.txt");
  replace_all(js, "</script", "<\\/script");
  std::string data =
      "<script id=\"memsight-data\" type=\"application/octet-stream\" data-encoding=\"";
  data += opts.compress ? "deflate" : "none";
  data += "\" data-size=\"" + std::to_string(raw.size()) + "\">";
  // Splice the big pieces in last, in one pass, to avoid copying them around.
  replace_all(page, "{{TITLE}}", html_escape(title));
  std::string css(viewer_asset("style.css"));
  css += viewer_asset("views.css");
  replace_all(page, "/*{{CSS}}*/", css);
  size_t js_at = page.find("/*{{JS}}*/");
  size_t data_at = page.find("<!--{{DATA}}-->");
  if (js_at == std::string::npos || data_at == std::string::npos || data_at > js_at)
    throw Error("html: page.html lacks its {{DATA}} or {{JS}} marker");
  std::string out;
  out.reserve(page.size() + js.size() + data.size() + payload.size() + 16);
  out.append(page, 0, data_at);
  out += data;
  out += payload;
  out += "</script>";
  out.append(page, data_at + 15, js_at - data_at - 15);
  out += js;
  out.append(page, js_at + 10, std::string::npos);
  return out;
}

}  // namespace memsight
