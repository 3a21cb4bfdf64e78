#!/usr/bin/env bash
# Builds the engine, the CLI and memsight._core, then runs every GPU test.
# Run on a machine with CUDA torch: tests/gpu/run.sh (2 GPUs for the torchrun test).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-$(command -v python3)}
mkdir -p build
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMSIGHT_TESTS=OFF \
  -DPython3_EXECUTABLE="$PY" >build/gpu-configure.log 2>&1 || { tail -30 build/gpu-configure.log; exit 1; }
cmake --build build/gpu --target memsight _core _linehook
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" MEMSIGHT_BIN="$PWD/build/gpu/memsight"
"$PY" -c "import memsight._core, memsight._linehook"  # fail loudly if a module did not build
# Test files or folders named on the command line replace the whole suite.
where=(tests/gpu)
for a in "$@"; do [[ "$a" == tests/* ]] && where=() && break; done
exec "$PY" -m pytest -q -rs "${where[@]}" "$@"
