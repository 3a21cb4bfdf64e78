"""Starts a real S3-compatible server (the npm package s3rver, pinned in
tests/python/s3rver/package.json) on 127.0.0.1 at a free port, for the upload
tests; installs it with npm first if needed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent / "s3rver"
REPO = Path(__file__).resolve().parents[2]
# This folder's pinned install, or one in the project's root node_modules.
CANDIDATES = [HERE / "node_modules" / "s3rver" / "bin" / "s3rver.js",
              REPO / "node_modules" / "s3rver" / "bin" / "s3rver.js"]


def ensure_installed(timeout: float = 300) -> Path:
    for entry in CANDIDATES:
        if entry.exists():
            return entry
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError("npm is not installed")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True,
                   timeout=timeout, stdout=subprocess.DEVNULL)
    return CANDIDATES[0]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


@contextmanager
def s3rver(buckets: tuple[str, ...] = ("memsight-test",), start_timeout: float = 30):
    """Yields the endpoint URL; the server and its data folder go away after."""
    entry = ensure_installed()
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is not installed")
    data = tempfile.mkdtemp(prefix="memsight-s3rver-")
    proc = None
    try:
        for _ in range(3):  # a free port can be taken between the probe and the bind
            port = _free_port()
            args = [node, str(entry), "-d", data, "-a", "127.0.0.1", "-p", str(port), "--silent"]
            for b in buckets:
                args += ["--configure-bucket", b]
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if _wait_listening(port, proc, start_timeout):
                break
            proc.kill()
            proc.wait(10)
            proc = None
        if proc is None:
            raise RuntimeError("s3rver did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":  # scripts/s3_server.sh runs this
    import sys

    with s3rver() as url:
        print(url, flush=True)
        try:
            sys.stdin.read() if not os.isatty(0) else time.sleep(3600)
        except KeyboardInterrupt:
            pass
