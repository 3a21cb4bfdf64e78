#!/usr/bin/env bash
# Installs what memsight needs to build and test, from Debian 12 packages
# (and from npm: playwright-core for the browser tests, ruff and TypeScript
# for the lint scripts). Idempotent: fast when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  build-essential cmake ninja-build pkg-config git
  zlib1g-dev libzstd-dev liblzma-dev libgtest-dev
  clang libclang-rt-14-dev                         # libFuzzer + sanitizers
  clang-format                                     # scripts/lint_cpp.sh
  python3 python3-dev python3-pytest python3-pybind11 pybind11-dev python3-yaml
  python3-boto3 python3-fsspec                     # uploads (s3://, other schemes)
  python3-torch python3-ipython                    # CPU tests of the torch tools and the magics
  python3-nbformat python3-nbclient python3-ipykernel  # the notebook run headlessly (tests/python/test_notebook.py)
  python3-pandas                                   # reference for the line profiler's tables
  python3-mypy                                     # scripts/lint_python.sh (ruff comes from npm, below)
  nodejs chromium                                  # viewer tests
  xz-utils zstd
  ccache                                           # the wheel's build reuses the release build's objects
  emscripten                                       # the standalone viewer's WebAssembly engine
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm ships with some Node.js builds and conflicts with Debian's npm package
# there: install Debian's only when no npm is on PATH.
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's sources of zlib, zstd and liblzma, compiled with emcc into the
# standalone viewer's engine (build/wasm-deps; emscripten has no ports here).
scripts/wasm_deps.sh
# The wheel's build backend (scripts/wheel_smoke.sh; build/wheel-backend).
scripts/wheel_deps.sh
# npm packages for the browser tests (playwright-core, pinned by its lock
# file). The S3 test server installs itself on first use (tests/python/s3rver).
if [ ! -d tests/browser/node_modules ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
# ruff for scripts/lint_python.sh: Debian packages none, npm has its
# WebAssembly build (pinned by scripts/ruff's lock file).
if [ ! -d scripts/ruff/node_modules ]; then
  (cd scripts/ruff && npm ci --no-audit --no-fund --silent)
fi
# TypeScript for scripts/lint_viewer.sh (pinned by viewer's lock file).
if [ ! -x viewer/node_modules/.bin/tsc ]; then
  (cd viewer && npm ci --no-audit --no-fund --silent)
fi
