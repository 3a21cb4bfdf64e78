// ruff's checks on the Python files named on the command line, through ruff's
// WebAssembly build (Debian packages no ruff; npm carries this one). Prints
// one line per finding as the ruff CLI does (path:row:col: CODE message) and
// exits 1 when there is any.
//
// The settings are [tool.ruff] of pyproject.toml, handed over as JSON in
// RUFF_SETTINGS by scripts/lint_python.sh. The WebAssembly build sees no
// file names, so settings tied to paths (per-file-ignores, exclude) have no
// effect here, and its default rule set is the playground's, not the CLI's:
// pyproject names `select` explicitly so both read the same.
import fs from "node:fs";
import { PositionEncoding, Workspace } from "@astral-sh/ruff-wasm-nodejs";

const settings = JSON.parse(process.env.RUFF_SETTINGS || "{}");
if (!settings.lint || !settings.lint.select) {
  console.error("ruff.mjs: [tool.ruff.lint] select is missing from the settings");
  process.exit(2);
}
const workspace = new Workspace(settings, PositionEncoding.Utf32);
let findings = 0;
for (const path of process.argv.slice(2)) {
  for (const d of workspace.check(fs.readFileSync(path, "utf8"))) {
    findings++;
    const at = `${path}:${d.start_location.row}:${d.start_location.column}`;
    console.log(`${at}: ${d.code ?? "syntax"} ${d.message}`);
  }
}
if (findings > 0) {
  console.log(`ruff ${Workspace.version()}: ${findings} finding${findings === 1 ? "" : "s"}`);
  process.exit(1);
}
