"""Uploads: destinations, retries with back-off, overwrite policy, staging,
and the files of an OOM reaching a file:// destination."""

from __future__ import annotations

import os
import threading
import time

import pytest

from memsight.torch import OOMObserver, TrainState, set_default_destination
from memsight.torch.callbacks import uploads
from memsight.torch.callbacks.uploads import Uploader, check_remote, remote_uri


def test_remote_uri_resolution(monkeypatch):
    assert remote_uri("s3://b/run/oom", "f.pickle") == "s3://b/run/oom/f.pickle"
    assert remote_uri("file:///tmp/x/", "f") == "file:///tmp/x/f"
    assert remote_uri("run/oom", "f") is None  # no scheme, no destination: stays local
    set_default_destination("s3://bucket/prefix/")
    assert remote_uri("/run/oom", "f") == "s3://bucket/prefix/run/oom/f"  # leading '/' stripped
    set_default_destination(None)
    monkeypatch.setenv("MEMSIGHT_UPLOAD_URI", "file:///dest")
    assert remote_uri("run", "f") == "file:///dest/run/f"


def test_check_remote():
    check_remote(None)
    check_remote("")
    check_remote("{run_name}/oom")
    check_remote("file:///tmp")
    with pytest.raises(ValueError, match="scheme 'nosuch'"):
        check_remote("nosuch://x/y")


def test_file_upload_and_overwrite_policy(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("one")
    dest = tmp_path / "remote" / "deep" / "a.txt"
    up = Uploader(num_attempts=3, backoff=0.01)
    up.upload(str(src), dest.as_uri())
    assert up.flush(10)
    assert dest.read_text() == "one"
    src.write_text("two")
    up.upload(str(src), dest.as_uri(), overwrite=False)  # refused, not retried
    up.upload(str(src), dest.as_uri(), overwrite=True)
    assert up.flush(10)
    r = up.results
    assert [x.ok for x in r] == [True, False, True]
    assert r[1].attempts == 1 and "exists" in r[1].error
    assert dest.read_text() == "two"
    up.close()


def test_retries_with_backoff_then_success(monkeypatch, tmp_path):
    calls = []

    def flaky(local, uri, overwrite=False):
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise ConnectionError("server went away")
        with open(local) as f:
            assert f.read() == "payload"

    monkeypatch.setattr(uploads, "upload_now", flaky)
    src = tmp_path / "p.txt"
    src.write_text("payload")
    up = Uploader(num_attempts=3, backoff=0.05)
    up.upload(str(src), "s3://b/k")
    assert up.flush(10)
    assert up.results[0].ok and up.results[0].attempts == 3
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # exponential back-off


def test_gives_up_after_num_attempts_and_never_raises(monkeypatch, tmp_path, caplog):
    def down(local, uri, overwrite=False):
        raise OSError("unreachable")

    monkeypatch.setattr(uploads, "upload_now", down)
    src = tmp_path / "p.txt"
    src.write_text("x")
    up = Uploader(num_attempts=2, backoff=0.01)
    up.upload(str(src), "s3://b/k")
    assert up.flush(10)
    assert not up.results[0].ok and up.results[0].attempts == 2
    assert "failed after 2 attempts" in caplog.text


def test_upload_does_not_block_and_staging_survives_deletion(monkeypatch, tmp_path):
    gate = threading.Event()
    got = []

    def slow(local, uri, overwrite=False):
        gate.wait(10)
        with open(local) as f:
            got.append(f.read())

    monkeypatch.setattr(uploads, "upload_now", slow)
    src = tmp_path / "p.txt"
    src.write_text("original")
    up = Uploader()
    t0 = time.monotonic()
    up.upload(str(src), "s3://b/k")
    assert time.monotonic() - t0 < 1.0  # queued, not uploaded
    os.unlink(src)  # the caller may delete (or replace) its file at once
    assert not up.flush(0.05)  # still pending
    gate.set()
    assert up.flush(10) and got == ["original"]
    up.close()


def test_oom_files_reach_a_file_destination(fake_torch, tmp_path, core):
    remote = (tmp_path / "bucket").as_uri() + "/{run_name}/oom_traces/rank{rank}_oom"
    obs = OOMObserver(folder=str(tmp_path / "local"), remote_file_name=remote)
    obs.arm(TrainState(run_name="r1"))
    fake_torch.oom()
    written = [os.path.basename(p) for p in obs.last_files]
    obs.close()  # flushes the uploads
    dest = tmp_path / "bucket" / "r1" / "oom_traces" / "rank0_oom"
    assert sorted(os.listdir(dest)) == sorted(written) and len(written) >= 2
    for name in written:
        assert (dest / name).read_bytes() == (tmp_path / "local" / name).read_bytes()


def test_relative_remote_uses_the_default_destination(fake_torch, tmp_path, core):
    set_default_destination((tmp_path / "dest").as_uri())
    obs = OOMObserver(folder=str(tmp_path / "local"), remote_file_name="/{run_name}/x")
    obs.arm(TrainState(run_name="r2"))
    fake_torch.oom()
    obs.close()
    assert "rank0_oom_snapshot.pickle" in os.listdir(tmp_path / "dest" / "r2" / "x")


def test_staging_folder_exists_only_while_needed(tmp_path):
    # A job's /tmp must not collect one empty folder per process: the
    # staging folder is made on the first upload and removed at exit, also
    # when nobody closes the shared uploader.
    import subprocess
    import sys

    src = tmp_path / "f.txt"
    src.write_text("x")
    dest = (tmp_path / "bucket").as_uri() + "/f.txt"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = (
        "from memsight.torch.callbacks import uploads\n"
        "u = uploads.Uploader()\n"
        "import os, tempfile; assert not os.listdir(tempfile.gettempdir())\n"
        f"uploads.shared_uploader().upload({str(src)!r}, {dest!r})\n"
        "assert os.listdir(tempfile.gettempdir())\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "bucket" / "f.txt").read_text() == "x"
    assert not os.listdir(tmp)
