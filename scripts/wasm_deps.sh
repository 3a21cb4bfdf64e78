#!/usr/bin/env bash
# The C libraries the WebAssembly engine links (zlib, zstd, liblzma), as
# Debian 12's own source packages, unpacked into build/wasm-deps/ for the
# wasm build (cmake/wasm.cmake) to compile with emcc. Debian's emscripten
# ships no ports and the build runs offline, so the sources come from the
# same archive as the native -dev packages. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=${MEMSIGHT_WASM_DEPS:-build/wasm-deps}
PKGS=(zlib libzstd xz-utils)
if [ -f "$DEST/.complete" ]; then
  exit 0
fi
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
# A private source list (the system's has no deb-src lines).
. scripts/private_apt.sh
private_apt deb-src bookworm
(cd "$work" && "${APT[@]}" source --download-only "${PKGS[@]}" >/dev/null)
for dsc in "$work"/*.dsc; do
  name=$(basename "$dsc" .dsc)
  name=${name%%_*}
  rm -rf "${DEST:?}/$name"
  dpkg-source -x --no-check "$dsc" "$DEST/$name" >/dev/null
done
rm -f "$DEST"/*.tar.*
touch "$DEST/.complete"
echo "wasm build sources in $DEST: $(ls "$DEST" | tr '\n' ' ')"
