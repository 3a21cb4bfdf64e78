#!/usr/bin/env bash
# What `pip wheel .` needs without a package index: the build backend
# (scikit-build-core) and pybind11. Debian 12 packages pybind11 but not
# scikit-build-core, which Debian 13 packages as architecture-independent
# .debs (with the newer `packaging` it needs). Those are unpacked into a
# folder of their own (default build/wheel-backend), never installed over the
# system's packages; the wheel build puts that folder on PYTHONPATH
# (scripts/wheel_build.sh). The .debs come from the mirror the system
# already uses, through a private package list. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${MEMSIGHT_WHEEL_BACKEND:-build/wheel-backend}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
for p in python3-pybind11 pybind11-dev python3-venv python3-wheel binutils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -f "$DEST/.complete" ]; then
  exit 0
fi
. scripts/private_apt.sh
private_apt deb trixie
(cd "$work" && "${APT[@]}" download python3-scikit-build-core python3-packaging \
   python3-pyproject-metadata python3-pathspec >/dev/null)
rm -rf "$DEST"
mkdir -p "$DEST"
for deb in "$work"/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
done
mv "$work/root/usr/lib/python3/dist-packages" "$DEST/site"
touch "$DEST/.complete"
echo "wheel build backend in $DEST/site: $(cd "$DEST/site" && ls -d *.dist-info | tr '\n' ' ')"
