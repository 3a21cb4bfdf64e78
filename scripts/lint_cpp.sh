#!/usr/bin/env bash
# clang-format (the repo's .clang-format) over every tracked C++ file of the
# engine, its tests, benchmarks and the Python module's native code; fails
# and names the files it would change. Seconds. Fix with
#   clang-format -i FILE...
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang-format >/dev/null 2>&1; then
  echo "lint (C++ format): clang-format not found (scripts/deps.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files -- \
  'src/*.cpp' 'src/*.h' 'include/*.h' 'tests/*.cpp' 'tests/*.h' 'bench/*.cpp' 'bench/*.h' \
  'python/src/*.cpp' 'python/src/*.h' 'python/memsight/torch/native/*.cpp' \
  'python/memsight/torch/native/*.h' 'python/memsight/torch/native/*.c')
# One run over all files; the files with a finding, once each.
mapfile -t bad < <(clang-format --dry-run --Werror "${files[@]}" 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  echo "lint (C++ format): clang-format would change ${#bad[@]} file(s):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "lint (C++ format): ${#files[@]} files clean"
