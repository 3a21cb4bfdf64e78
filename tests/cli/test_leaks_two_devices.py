"""`memsight leaks` on one process driving two GPUs (tests/data/make_leaks.py,
one_process_two_devices): torch records every step mark and optimizer step
on the device current when it runs (device 0), yet they are iteration
boundaries of device 1 too, which gets its iterations and its verdict."""

from __future__ import annotations

import json
import pathlib
import pickle
import sys

import pytest

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_leaks as ml  # noqa: E402


def leaks_json(run, tmp_path, snap: dict) -> dict:
    f = tmp_path / "two.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    r = run("leaks", "--json", f)
    assert r.returncode == 0, r.stderr
    return {d["device"]: d for d in json.loads(r.stdout)["devices"]}


@pytest.mark.parametrize("marks,source", [("optimizer", "optimizer steps"), ("memsight", "memsight steps"),
                                          ("profiler", "profiler steps")])
def test_device_1_takes_the_process_steps_recorded_on_device_0(run, tmp_path, marks, source):
    devices = leaks_json(run, tmp_path, ml.one_process_two_devices(steps=30, marks=marks, leak_on=1))
    assert sorted(devices) == [0, 1]
    for d in (0, 1):
        its = devices[d]["iterations"]
        assert (its["source"], its["count"]) == (source, 30), (d, its["description"])
    assert devices[0]["verdict"] == "none"
    one = devices[1]
    assert one["verdict"] == "leak" and one["measured"] == 28
    (site,) = one["sites"]
    assert (site["site"], site["bytes_per_iteration"], site["iterations_grown"]) == (ml.OUTPUT_SITE, 1 << 20, 28)


def test_a_leak_on_device_0_beside_a_clean_device_1(run, tmp_path):
    devices = leaks_json(run, tmp_path, ml.one_process_two_devices(steps=30, leak_on=0))
    assert (devices[0]["verdict"], devices[1]["verdict"]) == ("leak", "none")
    assert devices[1]["iterations"]["source"] == "optimizer steps"


def test_an_optimizer_step_that_did_not_touch_a_device_is_no_boundary_there(run, tmp_path):
    # Device 1's entries all moved to before the first optimizer step: no step
    # touched it, so none is its boundary (its iterations come from elsewhere).
    snap = ml.one_process_two_devices(steps=30)
    first_step = min(a["time_us"] for a in snap["external_annotations"])
    for i, e in enumerate(snap["device_traces"][1]):
        e["time_us"] = first_step - 100_000 + i
    devices = leaks_json(run, tmp_path, snap)
    assert devices[0]["iterations"]["source"] == "optimizer steps"
    assert devices[1]["iterations"]["source"] != "optimizer steps"
