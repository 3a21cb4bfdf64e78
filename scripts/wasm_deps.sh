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
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A private source list and package index: the system's apt configuration
# is left as it is (it has no deb-src lines).
mkdir -p "$work/lists/partial"
echo "deb-src http://deb.debian.org/debian bookworm main" >"$work/sources.list"
APT=(apt-get -qq -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
"${APT[@]}" update
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
