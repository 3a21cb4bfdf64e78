"""s3:// uploads through boto3 against a real S3-compatible server (s3rver)
started on 127.0.0.1 by the test. Skips only where node/npm or boto3 are
missing, unless MEMSIGHT_REQUIRE_S3=1 (CI), which turns that into a failure."""

from __future__ import annotations

import os

import pytest

from s3rver_server import s3rver

pytestmark = pytest.mark.s3


def _need(what: str, reason: str):
    if os.environ.get("MEMSIGHT_REQUIRE_S3") == "1":
        pytest.fail(f"{what} is required (MEMSIGHT_REQUIRE_S3=1): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def s3_endpoint():
    try:
        import boto3  # noqa: F401
    except ImportError:
        _need("boto3", "boto3 is not installed")
    try:
        with s3rver() as url:
            yield url
    except FileNotFoundError as e:
        _need("node/npm", str(e))


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    import boto3

    for k, v in {"S3_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": "S3RVER",
                 "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return boto3.session.Session().client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")


def _keys(client, prefix=""):
    out = client.list_objects_v2(Bucket="memsight-test", Prefix=prefix)
    return sorted(o["Key"] for o in out.get("Contents", []))


def test_upload_overwrite_policy_against_s3rver(s3, tmp_path):
    from memsight.torch.callbacks.uploads import Uploader

    src = tmp_path / "a.bin"
    src.write_bytes(b"\x00first" * 1000)
    up = Uploader(num_attempts=2, backoff=0.01)
    up.upload(str(src), "s3://memsight-test//runs/a.bin")  # leading '/' of the key dropped
    assert up.flush(60)
    assert up.results[-1].ok, up.results[-1].error
    assert s3.get_object(Bucket="memsight-test", Key="runs/a.bin")["Body"].read() == src.read_bytes()
    src.write_bytes(b"second")
    up.upload(str(src), "s3://memsight-test/runs/a.bin", overwrite=False)
    assert up.flush(60)
    assert not up.results[-1].ok and "exists" in up.results[-1].error
    assert s3.get_object(Bucket="memsight-test", Key="runs/a.bin")["Body"].read() != b"second"
    up.upload(str(src), "s3://memsight-test/runs/a.bin", overwrite=True)
    assert up.flush(60) and up.results[-1].ok
    assert s3.get_object(Bucket="memsight-test", Key="runs/a.bin")["Body"].read() == b"second"
    up.close()


def test_missing_bucket_fails_after_retries_without_raising(s3, tmp_path):
    from memsight.torch.callbacks.uploads import Uploader

    src = tmp_path / "a.bin"
    src.write_bytes(b"x")
    up = Uploader(num_attempts=2, backoff=0.01)
    up.upload(str(src), "s3://no-such-bucket/a.bin")
    assert up.flush(60)
    r = up.results[-1]
    assert not r.ok and r.attempts == 2 and "NoSuchBucket" in r.error
    up.close()


def test_oom_files_reach_s3(s3, fake_torch, tmp_path, core):
    from memsight.torch import OOMObserver, TrainState

    obs = OOMObserver(folder=str(tmp_path / "local"),
                      remote_file_name="s3://memsight-test/{run_name}/oom_traces/rank{rank}_oom")
    obs.arm(TrainState(run_name="s3run"))
    fake_torch.oom()
    names = sorted(os.path.basename(p) for p in obs.last_files)
    obs.close()  # flushes
    assert len(names) >= 2
    assert _keys(s3, "s3run/") == [f"s3run/oom_traces/rank0_oom/{n}" for n in names]
    body = s3.get_object(Bucket="memsight-test", Key="s3run/oom_traces/rank0_oom/rank0_oom_snapshot.pickle")["Body"].read()
    assert body == (tmp_path / "local" / "rank0_oom_snapshot.pickle").read_bytes()
