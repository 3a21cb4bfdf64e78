"""TorchProfiler and cyclic_schedule: Composer's schedule semantics (its own
test cases), naming, gzip, saved_traces, retention with real deletions,
uploads, the op table, and training never broken. Runs on CPU torch."""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import os
import subprocess

import pytest

from memsight.torch import Callbacks, ProfilerAction, TorchProfiler, TrainState, cyclic_schedule

A = ProfilerAction


def at(batch_in_epoch, dataloader_len=None):
    return TrainState(batch_in_epoch=batch_in_epoch, dataloader_len=dataloader_len)


@pytest.mark.parametrize("repeat", [1, 0])
def test_cyclic_schedule_composer_case(repeat):
    # Composer's test_cyclic_schedule: skip_first=1, wait=2, warmup=3, active=4
    s = cyclic_schedule(skip_first=1, wait=2, warmup=3, active=4, repeat=repeat)
    assert s(at(0)) == A.SKIP  # skip_first
    assert s(at(1)) == A.SKIP  # wait
    assert s(at(3)) == A.WARMUP
    assert s(at(6)) == A.ACTIVE
    assert s(at(15)) == (A.ACTIVE if repeat == 0 else A.SKIP)  # after one cycle of 9
    assert [s(at(b)) for b in range(1, 11)] == [A.SKIP] * 2 + [A.WARMUP] * 3 + [A.ACTIVE] * 3 + [
        A.ACTIVE_AND_SAVE, A.SKIP if repeat else A.SKIP]


def test_cyclic_schedule_counts_from_the_resume_point():
    s = cyclic_schedule(skip_first=1, wait=2, warmup=3, active=4)
    assert s(at(7)) == A.ACTIVE
    s.resumption_batch_idx = 4  # resumed at batch 4: skip_first counts from there
    assert s(at(7)) == A.WARMUP


def test_cyclic_schedule_saves_the_epochs_last_recorded_batch():
    s = cyclic_schedule(wait=0, warmup=1, active=4)
    assert s(at(3)) == A.ACTIVE
    assert s(at(3, dataloader_len=4)) == A.ACTIVE_AND_SAVE  # the epoch ends inside the active part
    assert s(at(0, dataloader_len=1)) == A.WARMUP  # warm-up is never saved


def test_cyclic_schedule_as_a_torch_schedule():
    torch = pytest.importorskip("torch")
    s = cyclic_schedule(wait=1, warmup=1, active=2)
    P = torch.profiler.ProfilerAction
    assert [s(i) for i in range(6)] == [P.NONE, P.WARMUP, P.RECORD, P.RECORD_AND_SAVE, P.NONE, P.NONE]
    with pytest.raises(ValueError, match="active must be >= 1"):
        cyclic_schedule(active=0)


@pytest.mark.parametrize("stack,shapes,memory", list(itertools.product([False, True], repeat=3)))
def test_memory_filename_needs_all_three_flags(stack, shapes, memory):
    # Composer's 16 combinations: a ValueError exactly when one is off
    kw = dict(with_stack=stack, record_shapes=shapes, profile_memory=memory)
    if stack and shapes and memory:
        TorchProfiler(memory_filename="m.html", **kw)
    else:
        with pytest.raises(ValueError, match="profile_memory=True, record_shapes=True and with_stack=True"):
            TorchProfiler(memory_filename="m.html", **kw)
    TorchProfiler(memory_filename=None, **kw)  # fine without a memory page
    with pytest.raises(ValueError, match="must end in .html"):
        TorchProfiler(memory_filename="m.json", with_stack=True, record_shapes=True)


def train(prof, batches, run_name="run1"):
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    with Callbacks(prof, run_name=run_name) as cbs:
        for _ in range(batches):
            cbs.batch_start()
            model(torch.randn(16, 32)).square().mean().backward()
            cbs.batch_end()


def test_traces_named_gzipped_listed_and_read_by_memsight(tmp_path):
    pytest.importorskip("torch")
    prof = TorchProfiler(schedule=cyclic_schedule(wait=1, warmup=1, active=2, repeat=2), use_gzip=True,
                         remote_file_name=None, record_shapes=True, with_stack=True)
    assert prof.filename == "rank{rank}.{batch}.pt.trace.json.gz"
    train(prof, 10)
    folder = os.path.join("run1", "torch_traces")
    assert sorted(os.listdir(folder)) == ["rank0.4.pt.trace.json.gz", "rank0.8.pt.trace.json.gz"]
    assert [(t.batch, files) for t, files in prof.saved_traces.items()] == [
        (4, [os.path.join(folder, "rank0.4.pt.trace.json.gz")]),
        (8, [os.path.join(folder, "rank0.8.pt.trace.json.gz")])]
    with gzip.open(os.path.join(folder, "rank0.4.pt.trace.json.gz")) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data  # a bare list without Kineto
    assert any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events)
    assert "cpu_time_total" in prof.op_tables and "aten::addmm" in prof.op_tables["cpu_time_total"]
    exe = os.environ.get("MEMSIGHT_BIN")
    if exe:  # memsight reads what it wrote: two recorded steps per trace
        rep = json.loads(subprocess.run([exe, "profile", "--json", os.path.join(folder, "rank0.8.pt.trace.json.gz")],
                                        capture_output=True, check=True).stdout)
        steps = [s["step"] for s in rep["steps"]]
        # the two active batches, 6 and 7 (torch before 2.0 labels each step with the one before)
        assert steps in ([6, 7], [5, 6]), steps


def test_num_traces_to_keep_deletes_the_oldest_once_uploaded(tmp_path):
    pytest.importorskip("torch")
    remote = "file://" + str(tmp_path / "remote" / "{run_name}" / "rank{rank}.{batch}.pt.trace.json")
    prof = TorchProfiler(schedule=cyclic_schedule(warmup=0, active=1, repeat=0), remote_file_name=remote,
                         num_traces_to_keep=2)
    train(prof, 5)
    folder = os.path.join("run1", "torch_traces")
    assert len(prof.saved_traces) == 5
    # every trace reached the remote folder; only the newest two stay local
    assert sorted(os.listdir(tmp_path / "remote" / "run1")) == [f"rank0.{b}.pt.trace.json" for b in range(1, 6)]
    assert sorted(os.listdir(folder)) == ["rank0.4.pt.trace.json", "rank0.5.pt.trace.json"]


def test_num_traces_to_keep_zero_deletes_each_after_upload(tmp_path):
    pytest.importorskip("torch")
    remote = "file://" + str(tmp_path / "remote" / "rank{rank}.{batch}.pt.trace.json")
    prof = TorchProfiler(schedule=cyclic_schedule(warmup=0, active=2), remote_file_name=remote, num_traces_to_keep=0)
    train(prof, 3)
    assert os.listdir(os.path.join("run1", "torch_traces")) == []
    assert os.listdir(tmp_path / "remote") == ["rank0.2.pt.trace.json"]
    # without an upload the local copy is the only one: -1 keeps all
    keep = TorchProfiler(schedule=cyclic_schedule(warmup=0, active=1, repeat=0), remote_file_name=None,
                         folder="keep", num_traces_to_keep=-1)
    train(keep, 3)
    assert len(os.listdir("keep")) == 3


def test_a_failed_export_is_logged_and_training_goes_on(caplog):
    torch = pytest.importorskip("torch")
    prof = TorchProfiler(schedule=cyclic_schedule(warmup=0, active=1, repeat=0), remote_file_name=None)
    original = torch.profiler.profile.export_chrome_trace

    def broken(self, path):
        raise OSError("disk full")

    torch.profiler.profile.export_chrome_trace = broken
    try:
        with caplog.at_level(logging.ERROR, logger="memsight"):
            train(prof, 3)  # does not raise
    finally:
        torch.profiler.profile.export_chrome_trace = original
    assert "could not save the trace" in caplog.text and "disk full" in caplog.text
    assert prof.saved_traces == {}


def test_overwrite_false_refuses_a_folder_with_traces():
    pytest.importorskip("torch")
    os.makedirs("run1/torch_traces")
    open("run1/torch_traces/old.json", "w").close()
    with pytest.raises(FileExistsError):
        train(TorchProfiler(remote_file_name=None), 1)
    train(TorchProfiler(remote_file_name=None, overwrite=True), 1)


def test_memory_page_from_the_timeline(tmp_path, monkeypatch, data_dir, core):
    """The memory_filename page is memsight's timeline page of what
    export_memory_timeline wrote (faked here where torch is too old to have it)."""
    torch = pytest.importorskip("torch")
    fixture = (data_dir / "profiler" / "memory_timeline.json.gz").read_bytes()

    def export_memory_timeline(self, path, device=None):
        with open(path, "wb") as f:
            f.write(fixture)

    monkeypatch.setattr(torch.profiler.profile, "export_memory_timeline", export_memory_timeline, raising=False)
    prof = TorchProfiler(schedule=cyclic_schedule(warmup=0, active=2), remote_file_name=None,
                         memory_filename="rank{rank}.{batch}.memory.html", record_shapes=True, with_stack=True)
    train(prof, 3)
    ((when, files),) = prof.saved_traces.items()
    assert [os.path.basename(f) for f in files] == ["rank0.2.pt.trace.json", "rank0.2.memory.html"]
    page = open(files[1], encoding="utf-8").read()
    assert '"kind":"timeline"' in page and "https://" not in page


def test_uploads_to_s3(tmp_path):
    pytest.importorskip("torch")
    import boto3

    from s3rver_server import s3rver

    try:
        server = s3rver()
        url = server.__enter__()
    except FileNotFoundError as e:
        if os.environ.get("MEMSIGHT_REQUIRE_S3") == "1":
            pytest.fail(f"node/npm is required (MEMSIGHT_REQUIRE_S3=1): {e}")
        pytest.skip(str(e))
    try:
        os.environ.update({"S3_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                           "AWS_DEFAULT_REGION": "us-east-1"})
        prof = TorchProfiler(schedule=cyclic_schedule(warmup=0, active=1, repeat=2),
                             remote_file_name="s3://memsight-test/{run_name}/rank{rank}.{batch}.pt.trace.json",
                             num_traces_to_keep=0)
        train(prof, 3)
        s3 = boto3.session.Session().client("s3", endpoint_url=url, region_name="us-east-1")
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="memsight-test", Prefix="run1/")["Contents"])
        assert keys == ["run1/rank0.1.pt.trace.json", "run1/rank0.2.pt.trace.json"]
        assert os.listdir(os.path.join("run1", "torch_traces")) == []  # uploaded, then removed locally
    finally:
        for k in ("S3_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            os.environ.pop(k, None)
        server.__exit__(None, None, None)
