#!/usr/bin/env bash
# mypy and ruff on python/, configured in pyproject.toml; fails on any
# finding. A few seconds. scripts/deps.sh installs both (mypy from Debian,
# ruff's WebAssembly build from npm into scripts/ruff/node_modules).
set -euo pipefail
cd "$(dirname "$0")/.."

files=$(git ls-files -co --exclude-standard 'python/*.py')
# ruff's settings are pyproject's [tool.ruff], handed to the WebAssembly build as JSON.
RUFF_SETTINGS=$(/usr/bin/python3 -c 'import json, tomllib; print(json.dumps(tomllib.load(open("pyproject.toml", "rb"))["tool"]["ruff"]))')
export RUFF_SETTINGS
status=0
# shellcheck disable=SC2086 # one argument per file (no spaces in the repo's paths)
node scripts/ruff/ruff.mjs $files || status=1
/usr/bin/python3 -m mypy --no-error-summary || status=1
[ "$status" -eq 0 ] && echo "lint (python): mypy and ruff clean"
exit "$status"
