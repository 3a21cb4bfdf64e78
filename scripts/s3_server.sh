#!/usr/bin/env bash
# Starts the S3-compatible test server (s3rver, from npm) on 127.0.0.1 at a
# free port and prints its endpoint; installs it into
# tests/python/s3rver/node_modules first if needed. Stops on Ctrl-C.
#   scripts/s3_server.sh            # prints http://127.0.0.1:PORT
#   S3_ENDPOINT_URL=http://127.0.0.1:PORT AWS_ACCESS_KEY_ID=S3RVER \
#   AWS_SECRET_ACCESS_KEY=S3RVER ... (bucket: memsight-test)
# Only `--install` installs and exits (for CI set-up).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [[ "${1:-}" == "--install" ]]; then
  cd "$here/tests/python/s3rver" && [[ -d node_modules/s3rver ]] || npm ci --no-audit --no-fund --loglevel=error
  exit 0
fi
exec python3 "$here/tests/python/s3rver_server.py"
