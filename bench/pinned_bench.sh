#!/usr/bin/env bash
# engine_bench.py on a few pinned cores of a bigger, quiet machine: a
# stand-in for the 2-core VM when that one is busy. Builds this tree and a
# baseline (a `git archive` tarball of the commit to compare with), then
# runs engine_bench and engine_phases on cores 0..CORES-1.
#
#   bench/pinned_bench.sh BASELINE.tar.gz LARGE.pickle.xz [CORES] [REPEAT]
#
# Prints the engine_bench table (this build, pickle.load, the baseline) and
# engine_phases with one thread and with CORES threads.
set -euo pipefail
cd "$(dirname "$0")/.."
base_tar=$1 large_xz=$2 cores=${3:-2} repeat=${4:-11}
pin="taskset -c 0-$((cores - 1))"
jobs=$(nproc)
build() {  # source dir, build dir
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMSIGHT_TESTS=OFF \
    >"$2.configure.log" 2>&1 || { tail -20 "$2.configure.log"; exit 1; }
  cmake --build "$2" -j "$jobs" --target memsight engine_phases >"$2.build.log" 2>&1 ||
    { tail -30 "$2.build.log"; exit 1; }
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old" && tar -xzf "$base_tar" -C "$work/old"
build . build/pinned
build "$work/old" "$work/old-build"
echo "## engine_bench on cores 0-$((cores - 1)) of $(nproc)"
$pin python3 bench/engine_bench.py --memsight build/pinned/memsight --python "$(command -v python3)" \
  --baseline "$work/old-build/memsight" --repeat "$repeat" --scale 0 --commands stats,summary \
  --large "$large_xz"
for t in 1 "$cores"; do
  echo "## engine_phases, this build, MEMSIGHT_THREADS=$t"
  MEMSIGHT_THREADS=$t $pin build/pinned/engine_phases bench/.data/large.pickle 9
  echo "## engine_phases, baseline, MEMSIGHT_THREADS=$t"
  MEMSIGHT_THREADS=$t $pin "$work/old-build/engine_phases" bench/.data/large.pickle 9
done
