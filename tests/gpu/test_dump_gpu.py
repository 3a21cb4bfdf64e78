"""The native snapshot dumper against torch's own snapshot of the same state.

Each test records a history, takes memsight's native snapshot and torch's
``_snapshot()`` back to back with nothing allocated in between, and requires
the same dicts, key order included (frames after symbolization too).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from gpu_helpers import make_model, train_step


def _key_orders(v):
    if isinstance(v, dict):
        return [(k, _key_orders(x)) for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [_key_orders(x) for x in v]
    return None


def _ready_dumper():
    from memsight.torch.capture import _native_dump

    _native_dump.prepare(wait=True)
    st = _native_dump.status()
    assert st["ready"], st["error"]
    print(f"\nnative dumper: {st}")
    return _native_dump.ready()


def _snapshot_entries_since(before, after):
    """The actions each device's trace gained from ``before`` to ``after``."""
    return [[e["action"] for e in a[len(b):]] for b, a in zip(before["device_traces"], after["device_traces"])]


def _same_as_torch(dumper):
    import torch

    from memsight.torch.capture import _native_dump
    from memsight.torch.capture._native_dump import same_as_torch

    # The dumper's warm-up thread asks torch for a snapshot too, which marks
    # every device (test_warming_marks_every_device below); landing between
    # our take and torch's, it would add a marker of its own.
    assert _native_dump.wait_warm(timeout=60), "the dumper's warm-up did not end in 60 s"
    torch.cuda.synchronize()
    ours = pickle.loads(dumper.take().pickle())
    theirs = torch.cuda.memory._snapshot()
    # Each snapshot call appends a "snapshot" entry to every device's trace
    # once it has read it: torch's trace is ours and the marker of our take.
    assert _snapshot_entries_since(ours, theirs) == [["snapshot"]] * len(ours["device_traces"])
    # torch against itself: two snapshots of one history convert its times anew.
    again = torch.cuda.memory._snapshot()
    drift = max((abs(a["time_us"] - b["time_us"]) for ta, tb in zip(theirs["device_traces"], again["device_traces"])
                 for a, b in zip(ta, tb)), default=0)
    assert same_as_torch(ours, theirs, time_slack=2 * drift + 2) is None
    trimmed = dict(theirs, device_traces=[t[: len(o)] for o, t in zip(ours["device_traces"], theirs["device_traces"])])
    assert _key_orders(ours) == _key_orders(trimmed)
    print(f"time_us drift: torch against torch {drift} us, ours against torch "
          f"{max((abs(a['time_us'] - b['time_us']) for ta, tb in zip(ours['device_traces'], theirs['device_traces']) for a, b in zip(ta, tb)), default=0)} us")
    print(f"equal to torch's: {sum(map(len, ours['device_traces']))} entries, {len(theirs['segments'])} "
          f"segments, {len(theirs.get('external_annotations', []))} annotations; phases {dumper.last_timings}")
    return theirs


@pytest.mark.parametrize("stacks", ["python", "all"])
def test_native_snapshot_equals_torchs(stacks):
    import torch

    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks=stacks)
    try:
        dumper = _ready_dumper()
        model, opt = make_model()
        side = torch.cuda.Stream()
        keep = []
        for step in range(3):
            train_step(model, opt)
            with torch.cuda.stream(side):  # a block used on another stream: record_stream
                x = torch.empty(1 << 20, device="cuda")
            x.record_stream(torch.cuda.current_stream())
            keep.append(torch.empty((step + 1) * 12345, device="cuda"))
            del x
        with torch.profiler.record_function("memsight-annotation"):
            keep.append(torch.empty(4096, device="cuda"))
        snap = _same_as_torch(dumper)
        frames = [f for e in snap["device_traces"][torch.cuda.current_device()] for f in e.get("frames", [])]
        assert any(f["filename"].endswith("gpu_helpers.py") for f in frames)
        if stacks == "all":
            assert any(f["filename"] in ("??", "") or f["filename"].endswith(".cpp") for f in frames)
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


def test_warming_marks_every_device():
    """Why a dump taken while the dumper warms up can hold one "snapshot" entry
    more: the warm-up asks torch for a snapshot (without traces), and torch
    marks every device's trace for it, as it does for a full snapshot."""
    import torch

    from memsight.torch.capture import _native_dump

    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        dumper = _ready_dumper()
        assert _native_dump.wait_warm(timeout=60), "the dumper's warm-up did not end in 60 s"
        keep = [torch.empty(1 << 20, device=f"cuda:{d}") for d in range(torch.cuda.device_count())]
        torch.cuda.synchronize()
        first = torch.cuda.memory._snapshot()
        second = torch.cuda.memory._snapshot()
        n = len(first["device_traces"])
        assert n == torch.cuda.device_count()
        # Nothing in between: the first call's marker alone.
        assert _snapshot_entries_since(first, second) == [["snapshot"]] * n
        dumper.warm()
        third = torch.cuda.memory._snapshot()
        # The second call's marker, then the warm-up's, on every device.
        assert _snapshot_entries_since(second, third) == [["snapshot", "snapshot"]] * n
        print(f"\n{n} devices: one marker per snapshot call, the warm-up's included")
        del keep
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


IDLE_JOB = r"""
import json, time, torch
from memsight.torch.capture import _native_dump
from memsight.torch import start_recording

torch.cuda.init()
start_recording()
_native_dump.prepare(wait=True)
assert _native_dump.ready() is not None, _native_dump.status()
time.sleep(0.5)  # the warm-up's first try, made as soon as the dumper is checked
first = torch.cuda.memory._snapshot()
time.sleep(3.5)  # nothing allocated: three more tries if each second were one
second = torch.cuda.memory._snapshot()
idle = [e["action"] for e in second["device_traces"][0][len(first["device_traces"][0]):]]
x = torch.empty(1 << 20, device="cuda")
print(json.dumps({"idle": idle, "warmed": _native_dump.wait_warm(timeout=30),
                  "stacks": _native_dump.status()["warmed_stacks"]}))
"""


def test_the_warm_up_marks_nothing_while_the_job_allocates_nothing():
    """A job that starts recording and then loads data for minutes gets no
    "snapshot" entry a second from the warm-up: it waits for an allocation."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", IDLE_JOB], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\nidle job: {got}")
    assert got["idle"] == ["snapshot"]  # the first snapshot's own marker, nothing more
    assert got["warmed"] and got["stacks"] > 0


def test_oom_observer_takes_the_native_path_and_writes_everything(tmp_path):
    import torch

    from memsight.torch import OOMObserver
    from memsight.torch.capture import _native_dump

    from gpu_helpers import SUFFIXES, check_oom_outputs

    obs = OOMObserver(folder=str(tmp_path), remote_file_name=None)
    obs.arm()
    try:
        _native_dump.prepare(wait=True)
        assert _native_dump.ready() is not None, _native_dump.status()
        keep = [torch.empty((1 << 18) + 1024 * (i % 5), device="cuda") for i in range(600)][::2]
        with pytest.raises(torch.cuda.OutOfMemoryError):
            torch.empty(1 << 44, dtype=torch.uint8, device="cuda")
        assert obs.last_path == "native"
        prefix = str(tmp_path / "rank0_oom")
        assert obs.last_files == [prefix + s for s in SUFFIXES]
        snap = check_oom_outputs(prefix)
        trace = snap["device_traces"][torch.cuda.current_device()]
        assert trace[-1]["action"] == "oom"
        assert snap["memsight_device_memory"][0]["device"] == torch.cuda.current_device()
        print(f"\nOOM files (native path) in {obs.last_duration:.3f}s; timings {obs.last_timings}; "
              f"phases {_native_dump.status()['last_dump']}")
        del keep
    finally:
        obs.close()
