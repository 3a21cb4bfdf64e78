"""Values a snapshot refers to many times cost a reference in the Python
objects too: memsight.load, the summary and the page hold one long name
once, and alike devices share one summary's values."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import memsight

MiB = 1 << 20

# Peak memory of the steps after import, in a fresh interpreter.
_MEASURE = """
import resource, sys
import memsight
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
s = memsight.load(sys.argv[1])
s.summary(); s.summary_text(frames="all"); s.html(); s.to_dict()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
"""


def entry(i: int, frames: list) -> dict:
    return {"action": "alloc", "addr": 4096 * i, "size": 512, "stream": 0, "time_us": i,
            "frames": frames}


def test_one_long_name_is_held_once(core, tmp_path: Path) -> None:
    # 300 frames naming one 256 KiB file (277 KB of pickle): summary() and
    # html() took 230 MB when each site's label was built whole.
    big = "f" * (256 << 10)
    f = tmp_path / "memo.pickle"
    f.write_bytes(pickle.dumps({"segments": [], "device_traces": [
        [entry(i, [{"name": "f", "filename": big, "line": i}]) for i in range(300)]]}, protocol=4))
    env = dict(os.environ, PYTHONPATH=str(Path(memsight.__file__).parents[1]))
    grown = int(subprocess.run([sys.executable, "-c", _MEASURE, str(f)], env=env, check=True,
                               capture_output=True, text=True, timeout=120).stdout)
    assert grown < 16 * MiB, grown
    s = memsight.load(f)
    site = s.summary()["devices"][0]["top_sites"][0]
    # Its label cut, saying how long it was (memsight/input_limits.h):
    # in each of site, stack and frames, of the 10 sites shown.
    assert site["site"] == "f" * 16384 + f"\u2026 [cut at 16384 of {len(big)} bytes]:0:f"
    assert len(s.summary_json()) < 10 * 3 * (16384 + 64) + 16384
    # to_dict keeps the sharing: one str object for every frame.
    d = s.to_dict()
    frames = [e["frames"][0]["filename"] for e in d["device_traces"][0]]
    assert frames[0] == big and all(x is frames[0] for x in frames)


def test_alike_devices_share_one_summary(core) -> None:
    n = 2_000
    snap = memsight.loads(pickle.dumps({"segments": [], "device_traces": [
        [entry(1, [])] for _ in range(n)]}, protocol=4))
    s = snap.summary()
    assert s == json.loads(snap.summary_json())
    devices = dict.__getitem__(s, "devices")  # as built, not wrapped for attribute access
    assert [d["device"] for d in devices] == list(range(n))
    # Each device its own dict, the values of the group shared.
    assert devices[1] is not devices[2]
    assert devices[1]["top_sites"] is devices[2]["top_sites"]
    assert snap.summary_text().startswith(f"Devices 0-{n - 1} ({n} alike) - 1 trace entry")
    # The page embeds the group once: it is about the size of one device's.
    assert len(snap.html()) < 250_000
