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
