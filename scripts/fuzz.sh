#!/usr/bin/env bash
# Fuzzes one or more targets of the `fuzz` preset for SECONDS each and prints
# libFuzzer's coverage (cov: edges, ft: features) when the corpus is loaded
# and at the end, so a run that sees too little of the engine shows.
#   scripts/fuzz.sh SECONDS [TARGET...]   (default: every target)
# Needs `cmake --preset fuzz && cmake --build --preset fuzz` first. Extra
# libFuzzer flags can come through FUZZ_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(unpickler snapshot source roundtrip shares)
  [ -x build/fuzz/fuzz_profile ] && TARGETS+=(profile)
  [ -x build/fuzz/fuzz_pickle_python ] && TARGETS+=(pickle_python)
fi
for t in "${TARGETS[@]}"; do
  case "$t" in
    source) dict=tests/fuzz/dict/source.dict; seeds=tests/fuzz/corpus/source ;;
    profile) dict=tests/fuzz/dict/profile.dict; seeds=tests/fuzz/corpus/profile ;;
    roundtrip | pickle_python) dict=tests/fuzz/dict/pickle.dict; seeds=tests/fuzz/corpus/snapshot ;;
    shares) dict=tests/fuzz/dict/shares.dict; seeds=tests/fuzz/corpus/shares ;;
    *) dict=tests/fuzz/dict/pickle.dict; seeds=tests/fuzz/corpus/$t ;;
  esac
  work=build/fuzz/corpus/$t
  mkdir -p "$work" build/fuzz/findings/$t
  log=build/fuzz/$t.log
  echo "== fuzz_$t for ${SECONDS_EACH}s"
  rc=0
  # shellcheck disable=SC2086
  build/fuzz/fuzz_$t "$work" "$seeds" -dict="$dict" -max_total_time="$SECONDS_EACH" \
    -max_len=65536 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
    -artifact_prefix=build/fuzz/findings/$t/ ${FUZZ_FLAGS:-} >"$log" 2>&1 || rc=$?
  # One process prints "#N INITED cov: ..."; -fork=J prints "#N: cov: ..." lines and no totals.
  start=$(grep -m1 -E "INITED|^#[0-9]+:" "$log" | grep -oE "cov: [0-9]+ ft: [0-9]+" || echo "cov: ? ft: ?")
  end=$(grep -E "^#[0-9]+" "$log" | tail -n1 | grep -oE "cov: [0-9]+ ft: [0-9]+" || echo "cov: ? ft: ?")
  runs=$(grep -oE "stat::number_of_executed_units: [0-9]+" "$log" | grep -oE "[0-9]+$" ||
    grep -E "^#[0-9]+:" "$log" | tail -n1 | grep -oE "^#[0-9]+" | tr -d "#" || echo "?")
  echo "fuzz_$t: start $start, end $end, $runs runs, exit $rc"
  if [ "$rc" -ne 0 ]; then
    grep -E "ERROR|SUMMARY|Test unit written|terminate|abort" "$log" | head -n 20
    exit "$rc"
  fi
done
