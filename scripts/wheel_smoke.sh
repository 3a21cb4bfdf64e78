#!/usr/bin/env bash
# Builds memsight's wheel from this tree as a user's `pip wheel .` would
# (no package index: scripts/wheel_deps.sh supplies the build backend), gives
# it its manylinux tag (scripts/wheel_tag.py), installs it into fresh virtual
# environments and checks it from outside the source tree: the CLI through
# the package's entry point, the standalone viewer opening a fixture in
# headless Chromium, `import memsight` without torch, `memsight.torch` with
# torch. CI runs it after the release build (scripts/test.sh).
#
#   scripts/wheel_smoke.sh            # the wheel lands in dist/
#   MEMSIGHT_WASM_PREBUILT=build/release/wasm scripts/wheel_smoke.sh
#       # embeds that build's WebAssembly engine instead of compiling it again
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-/usr/bin/python3}
FIX=${MEMSIGHT_FIXTURES:-$ROOT/../shared/fixtures/snapshots}
scripts/wheel_deps.sh

echo "== wheel: pip wheel . (build backend: build/wheel-backend)"
rm -rf dist && mkdir -p dist
settings=(--config-settings=build-dir=build/wheel)
if [ -n "${MEMSIGHT_WASM_PREBUILT:-}" ]; then
  settings+=("--config-settings=cmake.define.MEMSIGHT_WASM_PREBUILT=$(cd "$MEMSIGHT_WASM_PREBUILT" && pwd)")
fi
PYTHONPATH=$ROOT/build/wheel-backend/site "$PY" -m pip wheel . --no-build-isolation --no-deps \
  -q -w dist "${settings[@]}" >build/wheel-pip.log 2>&1 || { tail -40 build/wheel-pip.log; exit 1; }
wheel=$ROOT/$("$PY" scripts/wheel_tag.py dist/memsight-*.whl)
echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
"$PY" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
engines = [n for n in names if n.endswith(".so") and "_core" in n]
assert len(engines) == 1, engines
assert not any("/bin/" in n for n in names), "the wheel ships a second engine"
for need in ("memsight/_core.pyi", "memsight/py.typed"):
    assert need in names, f"{need} is missing from the wheel"
assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
           for n in names), "the license is missing from the wheel"
print(f"wheel holds the engine once, its type stubs and the license ({len(names)} files)")
PY

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== a fresh virtual environment without torch"
"$PY" -m venv "$work/plain"
"$work/plain/bin/pip" install -q --no-index --no-deps "$wheel"
cd "$work"  # outside the source tree from here on
ms="$work/plain/bin/memsight"
"$ms" --version
"$ms" summary "$FIX/mlp_train.pickle" | head -3
"$ms" trace "$FIX/transformer_train.pickle" 2>"$work/pipe.err" | head -1 >/dev/null || true
[ ! -s "$work/pipe.err" ] || { echo "a closed pipe printed: $(cat "$work/pipe.err")"; exit 1; }
"$ms" viewer -o "$work/viewer.html"
node "$ROOT/tests/browser/open_in_viewer.mjs" "$work/viewer.html" "$FIX/mlp_train.pickle" "$ms"
"$work/plain/bin/python" - "$FIX/mlp_train.pickle" <<'PY'
import sys
import memsight
snap = memsight.load(sys.argv[1])
assert "torch" not in sys.modules, "import memsight imported torch"
assert memsight.__file__.startswith(sys.prefix), memsight.__file__
print(f"import memsight without torch: {snap.trace_entry_count} trace entries, from {memsight.__file__}")
PY
echo "== a fresh virtual environment that sees the system's torch"
"$PY" -m venv --system-site-packages "$work/torch"
"$work/torch/bin/pip" install -q --no-index --no-deps "$wheel"
"$work/torch/bin/python" - <<'PY'
import sys
import memsight.torch as mt
import torch
assert mt.__file__.startswith(sys.prefix), mt.__file__
print(f"import memsight.torch with torch {torch.__version__}: {len(mt.__all__)} names")
PY
echo "wheel smoke test: passed"
