"""Kinds told by stacks and lifetimes alone, on runs recorded without
memsight (tests/data/make_kinds_stacks.py): gradients that zero_grad frees
before any other phase begins, DDP's buckets, FSDP2's buffers and
unsharded parameters (docs/summary.md, "What kind of memory")."""

from __future__ import annotations

import json
import pathlib
import pickle
import sys

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_kinds_stacks as mk  # noqa: E402

MiB = 1 << 20


def kinds_at(run, tmp_path, snap, event):
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(snap))
    r = run("diff", path, "--at", -1, "--at", event, "--json")
    assert r.returncode == 0, r.stderr
    return {k: v["after"] for k, v in json.loads(r.stdout)["by_category"].items() if v["after"]}


def test_sgd_gradients_freed_by_zero_grad_are_gradients(run, tmp_path):
    # SGD's second step allocates nothing: zero_grad frees the gradients
    # before any other phase starts, inside what the allocations alone
    # would call the backward.
    snap, ends = mk.sgd()
    for end in ends:
        got = kinds_at(run, tmp_path, snap, end)
        assert got["gradient"] == 3 * 4 * MiB, (end, got)
        assert "autograd_internal" not in got, (end, got)


def test_sgd_gradients_without_free_stacks_by_parameter_size(run, tmp_path):
    snap, ends = mk.sgd(free_stacks=False)
    got = kinds_at(run, tmp_path, snap, ends[1])
    assert got["gradient"] == 3 * 4 * MiB, got


def test_ddp_bucket_is_communication(run, tmp_path):
    snap, end = mk.ddp()
    got = kinds_at(run, tmp_path, snap, end)
    assert got == {"communication": 8 * MiB}, got


def test_fsdp2_buffers_and_unsharded_parameters(run, tmp_path):
    snap, at = mk.fsdp2()
    got = kinds_at(run, tmp_path, snap, at)
    assert got == {"communication": 8 * MiB, "parameter": 4 * MiB, "activation": 1 * MiB,
                   "gradient": 2 * MiB}, got


def with_graph_pool(snap):
    """A CUDA graph's private pool beside the default one: a 32 MiB segment
    of pool (1, 0), 8 MiB of it allocated, the rest in two free blocks."""
    base = 0x7F8000000000
    blocks = [{"address": base, "size": 8 * MiB, "requested_size": 8 * MiB, "state": "active_allocated",
               "frames": []},
              {"address": base + 8 * MiB, "size": 4 * MiB, "requested_size": 0, "state": "inactive",
               "frames": []},
              {"address": base + 12 * MiB, "size": 20 * MiB, "requested_size": 0, "state": "inactive",
               "frames": []}]
    snap["segments"].append({"device": 0, "address": base, "total_size": 32 * MiB,
                             "allocated_size": 8 * MiB, "active_size": 8 * MiB,
                             "requested_size": 8 * MiB, "stream": 0, "segment_type": "large",
                             "segment_pool_id": (1, 0), "is_expandable": False, "frames": [],
                             "blocks": blocks})
    return snap


def test_graph_pool_named_and_out_of_fragmentation(run, tmp_path):
    plain, _ = mk.ddp()
    path = tmp_path / "plain.pickle"
    path.write_bytes(pickle.dumps(plain))
    before = json.loads(run("summary", path, "--json").stdout)["devices"][0]
    path = tmp_path / "graph.pickle"
    path.write_bytes(pickle.dumps(with_graph_pool(mk.ddp()[0])))
    d = json.loads(run("summary", path, "--json").stdout)["devices"][0]
    assert d["graph_pools"] == {"pools": 1, "reserved": 32 * MiB, "allocated": 8 * MiB, "free": 24 * MiB}
    assert (d["free_now"], d["fragmentation"]) == (before["free_now"], before["fragmentation"])
    assert d["reserved_now"] == before["reserved_now"] + 32 * MiB
    text = run("summary", path).stdout.decode()
    assert "graph pools     32.0MiB reserved in 1 private pool of CUDA graphs, 8.0MiB allocated" in text


def state_only():
    """A state-only recording (enabled="state"): segments and blocks, no
    trace; one block from before recording (no stack), one allocated while
    recording (its stack is in the snapshot)."""
    base = 0x7F0000000000
    frames = [{"name": "load", "filename": "/work/project/train.py", "line": 12}]
    seg = {"device": 0, "address": base, "total_size": 20 * MiB, "allocated_size": 3 * MiB,
           "active_size": 3 * MiB, "requested_size": 3 * MiB, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
           "blocks": [{"address": base, "size": MiB, "requested_size": MiB, "state": "active_allocated",
                       "frames": []},
                      {"address": base + MiB, "size": 2 * MiB, "requested_size": 2 * MiB,
                       "state": "active_allocated", "frames": frames},
                      {"address": base + 3 * MiB, "size": 17 * MiB, "requested_size": 0,
                       "state": "inactive", "frames": []}]}
    return {"segments": [seg], "device_traces": [[]], "allocator_settings": {}}


def test_state_only_says_it_has_no_history(run, tmp_path):
    path = tmp_path / "state.pickle"
    path.write_bytes(pickle.dumps(state_only()))
    text = run("summary", path).stdout.decode()
    assert "before the first trace entry" not in text
    assert "peak allocated  3.0MiB, at the snapshot (no allocation history" in text
    assert "history         none: the device's trace is empty" in text
    assert "complete: every freed allocation was recorded" not in text
    # only the block with no stack was allocated before recording began
    assert "before recording 1.0MiB in 1 block was allocated before recording" in text
    assert "train.py:12:load" in text
    d = json.loads(run("summary", path, "--json").stdout)["devices"][0]
    assert d["exact"] is False and "no allocation history" in d["exactness"]
    assert d["categories"]["at_snapshot"]["by_category"]["before_recording"]["bytes"] == MiB
