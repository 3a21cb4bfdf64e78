"""The native recorder against torch's recording (issue 37, item 3).

Each workload runs twice, each time in a fresh process: recorded by memsight
with torch's Python unwinder (MEMSIGHT_NATIVE_RECORD=0) and with the native
one. torch's own _dump_snapshot writes both; the trace entries must be the
same in the same order (action, address, size, stream) with the same Python
frames, and the segments and blocks the same, stacks included. Addresses are
compared from the lowest address each process reserved: a fresh process gets
its device memory at another virtual address, the layout shifted whole. Workloads: the
GPU suite's shapes (an MLP under AdamW; C++ stacks; context="alloc"; a ring
that wraps; a CUDA graph's private pool; expandable segments) and a
transformers Llama under bf16 autocast.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("native_record_job.py")
WORKLOADS = ["mlp", "cpp_stacks", "alloc_context", "wrapped", "cuda_graph", "expandable", "llama"]


def run_job(mode: str, workload: str, out: Path) -> dict:
    env = dict(os.environ, MEMSIGHT_NATIVE_RECORD="1" if mode == "native" else "0")
    if workload == "expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    p = subprocess.run([sys.executable, str(JOB), mode, workload, str(out)], env=env,
                       capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


ADDRESSED = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
             "segment_unmap"}


def frames(x: dict) -> list:
    return [(f["filename"], f["line"], f["name"]) for f in x.get("frames", [])]


def base_address(snap: dict) -> int:
    """The lowest address the process's allocator reserved: each fresh process gets its
    device memory at another virtual address (the same layout, shifted)."""
    seen = [s["address"] for s in snap["segments"]]
    seen += [e["addr"] for dev in snap["device_traces"] for e in dev if e["action"].startswith("segment_")]
    return min(seen)


def entry_key(e: dict, base: int) -> tuple:
    addr = e["addr"] - base if e["action"] in ADDRESSED else e["addr"]
    return (e["action"], addr, e["size"], e["stream"], frames(e))


def segment_key(s: dict, base: int) -> tuple:
    return (s["device"], s["address"] - base, s["total_size"], s["stream"], s["segment_type"],
            s["allocated_size"], s["active_size"], frames(s),
            [(b["size"], b["state"], b.get("requested_size"), frames(b)) for b in s["blocks"]])


def first_difference(a: list, b: list, what: str) -> str | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"{what} {i}: native {x!r:.600} against torch's {y!r:.600}"
    return None if len(a) == len(b) else f"{what}: {len(a)} in native against torch's {len(b)}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The first native job builds the recorder into the cache; the others find it.
    run_job("native", "mlp", tmp_path_factory.mktemp("warm") / "warm.pickle")


@pytest.mark.parametrize("workload", WORKLOADS)
def test_native_recording_equals_torchs(built: None, workload: str, tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as pool:
        futures = {m: pool.submit(run_job, m, workload, tmp_path / f"{m}.pickle") for m in ("torch", "native")}
        results = {m: f.result() for m, f in futures.items()}
    counts = results["native"]["status"]["counts"]
    assert results["native"]["status"]["answering"] and counts["gathered"] > 0, results["native"]
    assert results["torch"]["status"]["answering"] is False
    snaps = {m: pickle.loads((tmp_path / f"{m}.pickle").read_bytes()) for m in ("torch", "native")}
    bases = {m: base_address(s) for m, s in snaps.items()}
    # "snapshot" entries mark each _snapshot() call, among them the native dumper's own
    # background check's, which comes at another moment in each process.
    traces = {m: [[entry_key(e, bases[m]) for e in dev if e["action"] != "snapshot"] for dev in s["device_traces"]]
              for m, s in snaps.items()}
    entries = sum(len(d) for d in traces["torch"])
    with_frames = sum(1 for d in traces["torch"] for e in d if e[4])
    print(f"{workload}: {entries} entries ({with_frames} with Python frames), "
          f"{len(snaps['torch']['segments'])} segments; native gathered {counts['gathered']} stacks, "
          f"{counts['distinct_stacks']} distinct")
    assert entries > 0 and with_frames > 0
    assert len(traces["native"]) == len(traces["torch"])
    for d, (a, b) in enumerate(zip(traces["native"], traces["torch"])):
        diff = first_difference(a, b, f"device {d} entry")
        assert diff is None, diff
    segs = {m: sorted(segment_key(s, bases[m]) for s in snap["segments"]) for m, snap in snaps.items()}
    diff = first_difference(segs["native"], segs["torch"], "segment")
    assert diff is None, diff
