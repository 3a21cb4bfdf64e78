// render_standalone_viewer: the standalone page. The viewer's own template,
// CSS and script (the report's modules plus standalone.js), with the
// engine's WebAssembly and emscripten's loader of it (built from the same
// src/ files by cmake/wasm.cmake) embedded: the page opens files by itself.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memsight/error.h"
#include "memsight/html.h"
#include "report/bundle.h"
#include "report/page_pack.h"

namespace memsight {
namespace {

std::string_view asset(std::string_view name) {
  std::string_view a = viewer_asset(name);
  if (a.empty()) throw Error("viewer: viewer assets missing (" + std::string(name) + ")");
  return a;
}

// The template with each marker replaced once, in one pass over the
// template only (the inserted pieces are never searched for markers).
std::string fill(std::string_view page,
                 const std::vector<std::pair<std::string_view, std::string_view>>& pieces) {
  std::string out;
  size_t at = 0;
  for (const auto& [marker, text] : pieces) {
    size_t p = page.find(marker, at);
    if (p == std::string_view::npos)
      throw Error("viewer: standalone.html lacks " + std::string(marker));
    out.append(page.substr(at, p - at));
    out.append(text);
    at = p + marker.size();
  }
  out.append(page.substr(at));
  return out;
}

}  // namespace

std::string render_standalone_viewer() {
  std::string_view loader = wasm_engine_asset("memsight_engine.js");
  std::string_view wasm = wasm_engine_asset("memsight_engine.wasm");
  if (loader.empty() || wasm.empty())
    throw Error(
        "this memsight was built without its WebAssembly engine (emscripten or the sources of "
        "its compression libraries were missing when it was built); "
        "install both with scripts/deps.sh and build again");
  std::string css(asset("style.css"));
  css += asset("views.css");
  css += asset("standalone.css");
  // The worker's script: emscripten's loader, then engine_worker.js.
  std::string worker(loader);
  worker += '\n';
  worker += asset("engine_worker.js");
  replace_all(worker, "</script", "<\\/script");
  std::string js = bundle_js("standalone_bundle.txt");
  replace_all(js, "</script", "<\\/script");
  return fill(asset("standalone.html"), {{"/*{{CSS}}*/", css},
                                         {"/*{{ENGINE_JS}}*/", worker},
                                         {"/*{{ENGINE_WASM}}*/", report::base64(wasm)},
                                         {"/*{{JS}}*/", js}});
}

}  // namespace memsight
