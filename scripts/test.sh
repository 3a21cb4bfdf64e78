#!/usr/bin/env bash
# The whole test suite: the lint and type checks, unit and golden tests
# (release and ASan+UBSan builds), a bounded fuzzing run, viewer tests in
# node and Chromium, and the Python and CLI tests (last, so its summary line
# closes the output).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
echo "== lint (C++ format)"
scripts/lint_cpp.sh
echo "== lint (python)"
scripts/lint_python.sh
echo "== lint (viewer)"
scripts/lint_viewer.sh
echo "== lint (sizes)"
/usr/bin/python3 scripts/lint_size.py
FUZZ_SECONDS=${FUZZ_SECONDS:-40}
# The wheel's build (below) compiles the engine again: through ccache, most
# of it comes from the release build's objects.
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD"
fi

echo "== build (release)"
cmake --preset release >/dev/null
cmake --build --preset release
echo "== unit + golden tests (release)"
ctest --test-dir build/release --output-on-failure -j2

echo "== unit + golden tests (ASan + UBSan)"
# The asan preset compiles at -O1 with line tables only (-g1): half the
# compile time of -O2 -g on two cores, and reports still name file and line.
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --test-dir build/asan --output-on-failure -j2

echo "== fuzzing each reader for ${FUZZ_SECONDS}s (coverage at start and end)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
scripts/fuzz.sh "${FUZZ_SECONDS}"

# The page and viewer tests use the release build (the newest build is the
# fuzzers', which has no WebAssembly engine).
export MEMSIGHT="$PWD/build/release/memsight"
if [ -d viewer/test ]; then
  echo "== viewer unit tests (node)"
  node --test viewer/test/
fi
if [ -d tests/browser ]; then
  echo "== browser tests (headless chromium, offline)"
  node --test tests/browser/
fi

echo "== wheel: built, tagged, installed in fresh virtual environments, run from outside the tree"
MEMSIGHT_WASM_PREBUILT=build/release/wasm scripts/wheel_smoke.sh

echo "== python + CLI tests"
export MEMSIGHT_BIN="$PWD/build/release/memsight"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export MEMSIGHT_REQUIRE_S3=1  # the S3 upload test must run, not skip
/usr/bin/python3 -m pytest -q tests/python tests/cli
