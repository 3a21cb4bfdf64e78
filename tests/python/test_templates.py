"""Path templates, folder policy and remote names, as Composer renders them."""

from __future__ import annotations

import sys
import types

import pytest

from memsight.torch import TrainState
from memsight.torch._util.dist import dist_info
from memsight.torch.callbacks.templates import (
    ensure_folder_is_empty,
    format_name_with_dist,
    format_name_with_dist_and_time,
    parse_uri,
    partial_format,
)


@pytest.mark.parametrize(
    "template, kwargs, expected",
    [
        ("{a}/{b}", {"a": 1}, "1/{b}"),
        ("{a:03d}-{b!r}", {"a": 7, "b": "x"}, "007-'x'"),
        ("{}{}", {}, "{}{}"),
        ("{0}-{missing.attr}", {}, "{0}-{missing.attr}"),
        ("{a.real}", {"a": 5}, "5"),
        ("{{literal}} {a}", {"a": "v"}, "{literal} v"),
        ("{a:{w}}", {"a": 1}, "{a:{w}}"),
        ("{a:>{w}}", {"a": 1, "w": 3}, "  1"),
        ("no fields", {}, "no fields"),
        ("{rank:x}", {"rank": "not-an-int"}, "{rank:x}"),
    ],
)
def test_partial_format_keeps_what_it_cannot_fill(template, kwargs, expected):
    assert partial_format(template, **kwargs) == expected


def test_partial_format_positional():
    assert partial_format("{}-{}-{}", "a", "b") == "a-b-{}"


def test_format_name_with_dist_single_process():
    assert format_name_with_dist(
        "{run_name}/r{rank}-l{local_rank}-w{world_size}-lw{local_world_size}-n{node_rank}-{unknown}", "run"
    ) == "run/r0-l0-w1-lw1-n0-{unknown}"


def test_format_name_with_dist_from_torchrun_env(monkeypatch):
    for k, v in {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"}.items():
        monkeypatch.setenv(k, v)
    assert format_name_with_dist("{rank}/{world_size}/{local_rank}/{local_world_size}/{node_rank}", "r") == "5/8/1/4/1"
    monkeypatch.setenv("NODE_RANK", "3")  # NODE_RANK wins over torchrun's GROUP_RANK
    assert format_name_with_dist("{node_rank}", "r") == "3"


def test_format_name_with_dist_from_slurm_env(monkeypatch):
    for k, v in {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
                 "SLURM_NTASKS_PER_NODE": "2(x2)", "SLURM_NODEID": "1"}.items():
        monkeypatch.setenv(k, v)
    assert dist_info() == {"rank": 3, "world_size": 4, "local_rank": 1, "local_world_size": 2, "node_rank": 1}


def _fake_dist(rank: int, world: int) -> types.ModuleType:
    d = types.ModuleType("torch.distributed")
    d.is_available = lambda: True
    d.is_initialized = lambda: True
    d.get_rank = lambda: rank
    d.get_world_size = lambda: world
    return d


def test_initialised_process_group_wins_over_env(monkeypatch):
    monkeypatch.setenv("RANK", "9")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setitem(sys.modules, "torch.distributed", _fake_dist(rank=2, world=4))
    info = dist_info()
    assert info["rank"] == 2 and info["world_size"] == 4 and info["local_rank"] == 1
    # Per-node numbers no variable gives are left out, so templates keep them literally.
    assert "node_rank" not in info and "local_world_size" not in info
    assert format_name_with_dist("rank{rank}-node{node_rank}", "r") == "rank2-node{node_rank}"


def test_uninitialised_process_group_falls_back_to_env(monkeypatch):
    d = _fake_dist(0, 1)
    d.is_initialized = lambda: False
    monkeypatch.setitem(sys.modules, "torch.distributed", d)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert dist_info()["rank"] == 3 and dist_info()["world_size"] == 4


def test_format_name_with_dist_and_time_renders_every_variable():
    st = TrainState(run_name="ignored", epoch=2, batch=41, batch_in_epoch=7, sample=1312, sample_in_epoch=224,
                    token=671744, token_in_epoch=114688, total_wct=36000.0, epoch_wct=3600.0, batch_wct=5.0)
    template = ("{run_name}/ep{epoch}-ba{batch}-bie{batch_in_epoch}-s{sample}-sie{sample_in_epoch}"
                "-t{token}-tie{token_in_epoch}-{total_wct}-{epoch_wct}-{batch_wct}-rank{rank}-{extra}-{nope}")
    assert format_name_with_dist_and_time(template, "run", st, extra="x") == (
        "run/ep2-ba41-bie7-s1312-sie224-t671744-tie114688-36000.0-3600.0-5.0-rank0-x-{nope}"
    )


def test_train_state_counts_batches_epochs_samples_and_clock():
    st = TrainState(run_name="r")
    st.start_fit()
    for _ in range(3):
        st.start_batch()
        st.end_batch(samples=8, tokens=100)
    st.end_epoch()
    st.start_batch()
    st.end_batch(samples=4)
    assert (st.epoch, st.batch, st.batch_in_epoch, st.sample, st.sample_in_epoch, st.token, st.token_in_epoch) == (
        1, 4, 1, 28, 4, 300, 0)
    assert st.total_wct >= st.epoch_wct >= st.batch_wct >= 0.0
    assert st.total_wct > 0.0
    assert isinstance(st.template_vars()["total_wct"], float)


def test_run_name_from_environment(monkeypatch):
    monkeypatch.setenv("RUN_NAME", "from-env")
    assert TrainState().ensure_run_name() == "from-env"
    monkeypatch.delenv("RUN_NAME")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "abc123")
    assert TrainState().ensure_run_name() == "memsight-abc123"
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    assert TrainState().ensure_run_name().startswith("memsight-2")


def test_ensure_folder_is_empty(tmp_path):
    root = tmp_path / "out"
    ensure_folder_is_empty(root)  # missing folder: fine
    root.mkdir()
    ensure_folder_is_empty(root)
    (root / ".hidden").write_text("x")
    (root / ".cache").mkdir()
    (root / ".cache" / "visible-inside-hidden").write_text("x")
    (root / "empty-sub").mkdir()
    ensure_folder_is_empty(root)  # hidden files, hidden folders and empty folders are ignored
    (root / "empty-sub" / "rank0_oom_snapshot.pickle").write_text("x")
    with pytest.raises(FileExistsError) as e:
        ensure_folder_is_empty(root)
    assert "rank0_oom_snapshot.pickle" in str(e.value) and "overwrite=True" in str(e.value)


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("s3://bucket/a/b", ("s3", "bucket", "a/b")),
        ("s3://bucket//a/b", ("s3", "bucket", "a/b")),
        ("oci://bucket@namespace/path", ("oci", "bucket", "path")),
        ("/a/long/path", ("", "", "/a/long/path")),
        ("relative/path", ("", "", "relative/path")),
        ("{run_name}/oom_traces/rank{rank}_oom", ("", "", "{run_name}/oom_traces/rank{rank}_oom")),
        ("file:///tmp/x%20y/z", ("file", "", "/tmp/x y/z")),
        ("gs://b", ("gs", "b", "")),
    ],
)
def test_parse_uri(uri, expected):
    assert parse_uri(uri) == expected
