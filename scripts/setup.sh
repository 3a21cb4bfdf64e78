#!/usr/bin/env bash
# Fresh Debian 12 machine -> built memsight, run on the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
echo
echo "== memsight summary tests/data/oom.pickle"
build/release/memsight summary tests/data/oom.pickle
build/release/memsight view tests/data/oom.pickle -o build/oom.html
echo "open build/oom.html in a browser for the interactive report"
