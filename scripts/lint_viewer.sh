#!/usr/bin/env bash
# Type-checks the viewer's JavaScript with TypeScript (tsc --checkJs, no
# output; pinned in viewer/package-lock.json, installed by scripts/deps.sh)
# and checks that the modules each page joins into one script declare no
# top-level name twice. Fails on any finding. About ten seconds.
set -euo pipefail
cd "$(dirname "$0")/../viewer"
if [ ! -x node_modules/.bin/tsc ]; then
  echo "lint_viewer: TypeScript is not installed; run scripts/deps.sh" >&2
  exit 2
fi
# The pages (DOM), the node tests (node's types) and the standalone
# viewer's worker (a worker's globals) are three programs.
for cfg in tsconfig.json tsconfig.test.json tsconfig.worker.json; do
  node_modules/.bin/tsc -p "$cfg" --pretty false
done
node check_bundles.mjs
