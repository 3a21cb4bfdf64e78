#!/usr/bin/env bash
# A current torch on a machine whose own is too old for fake CUDA steps.
#
# Debian 12's python3-torch (1.13) cannot run an estimate's fake steps, so
# the estimate's tests that need torch >= 2.4 skip there. This builds a
# Debian 13 chroot (torch 2.6, CPU only, Python 3.13) with this checkout
# mounted at /work, builds memsight._core for its Python, and runs those
# tests (or the command given) inside it:
#
#   sudo scripts/torch_chroot.sh                      # the estimate's tests
#   sudo scripts/torch_chroot.sh python3 bench/estimate_speed.py
#
# ROOT (default /opt/trixie) is where the chroot goes; the first run takes
# a few minutes (the packages come from deb.debian.org), later ones reuse it.
set -euo pipefail
ROOT=${ROOT:-/opt/trixie}
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [[ $EUID -ne 0 ]]; then echo "torch_chroot.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 1; fi
if [[ ! -x "$ROOT/usr/bin/python3" ]] || ! chroot "$ROOT" python3 -c "import torch" 2>/dev/null; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
  debootstrap --variant=minbase --include=python3-torch,python3-numpy trixie "$ROOT" http://deb.debian.org/debian
  cp /etc/resolv.conf "$ROOT/etc/"
  chroot "$ROOT" apt-get install -y -qq g++ cmake ninja-build pkg-config pybind11-dev python3-dev python3-pytest \
    libtorch-dev libzstd-dev liblzma-dev zlib1g-dev
fi
mkdir -p "$ROOT/work" "$ROOT/proc" "$ROOT/dev"
# Bound for this run only: a chroot left with the checkout mounted in it
# would take the checkout with it if it were ever deleted.
mounted=()
for pair in "$(dirname "$REPO"):work" "/proc:proc" "/dev:dev"; do
  if ! mountpoint -q "$ROOT/${pair#*:}"; then
    mount --bind "${pair%%:*}" "$ROOT/${pair#*:}" && mounted+=("$ROOT/${pair#*:}")
  fi
done
trap 'for m in "${mounted[@]}"; do umount "$m"; done' EXIT
inner=/work/$(basename "$REPO")
chroot "$ROOT" bash -c "cd $inner && cmake -S . -B build/chroot -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMEMSIGHT_TESTS=OFF -DMEMSIGHT_WASM=OFF -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null \
  && cmake --build build/chroot --target _core memsight >/dev/null"
if [[ $# -eq 0 ]]; then
  set -- python3 -m pytest -q -p no:cacheprovider tests/python/test_estimate_ranks.py tests/python/test_estimate_api.py
fi
chroot "$ROOT" env PYTHONPATH="$inner/python" MEMSIGHT_BIN="$inner/build/chroot/memsight" \
  bash -c 'cd "$0" && exec "$@"' "$inner" "$@"
