"""MemorySnapshot's window, and its coexistence with an armed OOMObserver."""

from __future__ import annotations

import os
import pickle

import pytest

from memsight.torch import Callbacks, MemorySnapshot, OOMObserver
from memsight.torch.callbacks.memory_snapshot import parse_batches


@pytest.mark.parametrize("value, n", [(3, 3), ("3", 3), ("3ba", 3), (" 12 ba ", 12), ("2batches", 2)])
def test_parse_batches(value, n):
    assert parse_batches(value) == n


@pytest.mark.parametrize("value", ["3ep", "0ba", 0, -1, "x", True, "1.5ba"])
def test_parse_batches_rejects(value):
    with pytest.raises(ValueError):
        parse_batches(value)


def _run(runner, batches, on_batch=None):
    for i in range(batches):
        runner.batch_start()
        if on_batch:
            on_batch(i)
        runner.batch_end()


def test_window_records_the_right_batches_and_names_files_by_its_end(fake_torch, tmp_path, core):
    ms = MemorySnapshot(skip_batches=1, interval="3ba", folder=str(tmp_path / "{run_name}"), remote_file_name=None)
    runner = Callbacks(ms, run_name="r")
    runner.fit_start()
    seen = []
    _run(runner, 6, on_batch=lambda i: seen.append(fake_torch.enabled))
    # batch 1 skipped; batches 2-4 recorded; then off again
    assert seen == [None, "all", "all", "all", None, None]
    assert fake_torch.enabled is None
    assert ms.done and fake_torch.snapshots_taken == 1
    assert sorted(os.listdir(tmp_path / "r")) == ["rank0.4.memory_snapshot.html", "rank0.4.memory_snapshot.pickle"]
    with open(tmp_path / "r" / "rank0.4.memory_snapshot.pickle", "rb") as f:
        assert pickle.load(f)["segments"] == fake_torch.snapshot_data["segments"]
    with open(tmp_path / "r" / "rank0.4.memory_snapshot.html", encoding="utf-8") as f:
        assert "<script" in f.read()
    runner.fit_end(); runner.close()


def test_window_does_not_disable_an_armed_oom_observer(fake_torch, tmp_path, core):
    oom = OOMObserver(folder=str(tmp_path / "oom"), remote_file_name=None)
    ms = MemorySnapshot(skip_batches=0, interval=2, folder=str(tmp_path / "ms"), remote_file_name=None)
    runner = Callbacks(oom, ms, run_name="r")
    runner.fit_start()
    _run(runner, 2)
    assert ms.done and len(os.listdir(tmp_path / "ms")) == 2
    assert fake_torch.enabled == "all"  # the OOM observer still records
    fake_torch.oom()
    assert oom.oom_count == 1
    assert "rank0_oom_snapshot.pickle" in os.listdir(tmp_path / "oom")
    runner.close()
    assert fake_torch.enabled is None


def test_fit_ending_inside_the_window_writes_what_was_recorded(fake_torch, tmp_path, core):
    ms = MemorySnapshot(skip_batches=0, interval=10, folder=str(tmp_path), remote_file_name=None)
    with Callbacks(ms, run_name="r") as runner:
        _run(runner, 3)
        assert fake_torch.enabled == "all"
    assert sorted(os.listdir(tmp_path)) == ["rank0.3.memory_snapshot.html", "rank0.3.memory_snapshot.pickle"]
    assert fake_torch.enabled is None


def test_close_without_window_end_stops_recording(fake_torch, tmp_path):
    ms = MemorySnapshot(skip_batches=0, interval=10, folder=str(tmp_path), remote_file_name=None)
    ms.fit_start()
    ms.batch_start()
    assert fake_torch.enabled == "all"
    ms.close()
    assert fake_torch.enabled is None and os.listdir(tmp_path) == []
