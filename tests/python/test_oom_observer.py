"""OOMObserver's OOM path, driven through torch's observer API (a stand-in
allocator here; tests/gpu runs a real OOM)."""

from __future__ import annotations

import html.parser
import logging
import os
import pickle
import xml.etree.ElementTree as ET

import pytest

import memsight
from memsight.torch import Callbacks, OOMObserver, TrainState
from memsight.torch.callbacks import oom as oom_mod

SUFFIXES = ["_snapshot.pickle", "_trace_plot.html", "_segment_plot.html",
            "_segment_flamegraph.svg", "_memory_flamegraph.svg", "_oom_diagnosis.txt"]


class _PageParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def check_outputs(prefix: str, expected_snapshot: dict) -> None:
    """Every file exists and opens: pickle (pickle.load and memsight), SVG as
    XML, pages as HTML with a script, diagnosis as text."""
    with open(prefix + "_snapshot.pickle", "rb") as f:
        saved = pickle.load(f)
    # torch's snapshot as taken, plus what the observer knew of the device
    assert saved.pop("memsight_device_memory")[0]["device"] == 0
    assert saved == expected_snapshot
    snap = memsight.load(prefix + "_snapshot.pickle")
    assert snap.trace_entry_count == sum(len(t) for t in expected_snapshot["device_traces"])
    for kind in ("segment", "memory"):
        root = ET.parse(prefix + f"_{kind}_flamegraph.svg").getroot()
        assert root.tag.endswith("svg")
    for kind in ("trace", "segment"):
        with open(prefix + f"_{kind}_plot.html", encoding="utf-8") as f:
            page = f.read()
        p = _PageParser()
        p.feed(page)
        assert "html" in p.tags and "script" in p.tags
    with open(prefix + "_oom_diagnosis.txt", encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("CUDA out of memory (rank 0 of 1, device 0;")
    assert "engine's diagnosis is unavailable" not in text


def test_oom_writes_five_files_and_the_diagnosis(fake_torch, tmp_path, core):
    obs = OOMObserver(folder=str(tmp_path / "{run_name}" / "torch_traces"), filename="rank{rank}_b{batch}_oom",
                      remote_file_name=None)
    runner = Callbacks(obs, run_name="run1")
    runner.fit_start()
    runner.batch_start(); runner.batch_end()
    runner.batch_start(); runner.batch_end()
    runner.batch_start()
    assert fake_torch.enabled == "all" and fake_torch.options["context"] == "alloc"
    fake_torch.oom(device=0, alloc=1 << 40, total=80 << 30, free=3 << 20)  # returns: torch raises after it
    prefix = str(tmp_path / "run1" / "torch_traces" / "rank0_b2_oom")
    assert obs.last_files == [prefix + s for s in SUFFIXES]
    check_outputs(prefix, fake_torch.snapshot_data)
    with open(prefix + "_oom_diagnosis.txt") as f:
        head = f.read().splitlines()[:2]
    assert "epoch 0, batch 2" in head[0] and "run run1" in head[0]
    assert "requested 1.0TiB" in head[1] and "3.0MiB free of 80.0GiB" in head[1]
    assert obs.last_duration is not None and obs.oom_count == 1
    runner.close()
    assert fake_torch.enabled is None  # recording released
    fake_torch.oom()
    assert obs.oom_count == 1  # disarmed: nothing more written


def test_one_failing_output_loses_none_of_the_others(fake_torch, tmp_path, core, monkeypatch, caplog):
    real_svg = memsight.Snapshot.svg

    def flaky_svg(self, kind="segments", *a, **k):
        if kind == "segments":
            raise RuntimeError("renderer exploded")
        return real_svg(self, kind, *a, **k)

    monkeypatch.setattr(memsight.Snapshot, "svg", flaky_svg)
    obs = OOMObserver(folder=str(tmp_path), remote_file_name=None).arm(TrainState(run_name="r"))
    with caplog.at_level(logging.ERROR, logger="memsight"):
        fake_torch.oom()
    names = sorted(os.listdir(tmp_path))
    assert names == sorted("rank0_oom" + s for s in SUFFIXES if s != "_segment_flamegraph.svg")
    assert "segment flamegraph" in caplog.text and "renderer exploded" in caplog.text
    obs.close()


def test_engine_failure_still_writes_pickle_and_diagnosis(fake_torch, tmp_path, monkeypatch):
    def broken(_raw):
        raise memsight.MemsightError("engine cannot read this")

    monkeypatch.setattr(memsight.snapshot, "loads", broken)
    obs = OOMObserver(folder=str(tmp_path), remote_file_name=None).arm(TrainState(run_name="r"))
    fake_torch.oom()
    assert sorted(os.listdir(tmp_path)) == ["rank0_oom_oom_diagnosis.txt", "rank0_oom_snapshot.pickle"]
    with open(tmp_path / "rank0_oom_oom_diagnosis.txt") as f:
        assert "engine's diagnosis is unavailable" in f.read()
    obs.close()


def test_nothing_recorded_means_no_files(fake_torch, tmp_path, caplog):
    obs = OOMObserver(folder=str(tmp_path), remote_file_name=None).arm(TrainState(run_name="r"))
    fake_torch.record_memory_history(None)  # someone turned recording off behind memsight's back
    with caplog.at_level(logging.WARNING, logger="memsight"):
        fake_torch.oom()
    assert os.listdir(tmp_path) == []
    assert "no allocation history was recorded" in caplog.text
    obs.close()


def test_handler_errors_never_escape_into_the_allocator(fake_torch, tmp_path, monkeypatch, caplog):
    obs = OOMObserver(folder=str(tmp_path), remote_file_name=None).arm(TrainState(run_name="r"))

    def fail():
        raise RuntimeError("snapshot failed")

    monkeypatch.setattr(fake_torch, "memory_snapshot", fail)
    import sys
    monkeypatch.setattr(sys.modules["torch"].cuda.memory, "_snapshot", fail)
    with caplog.at_level(logging.ERROR, logger="memsight"):
        fake_torch.oom()  # must not raise
    assert "could not be taken" in caplog.text
    obs.close()


def test_overwrite_false_refuses_a_non_empty_folder(fake_torch, tmp_path):
    (tmp_path / "old_file.txt").write_text("x")
    (tmp_path / ".hidden").write_text("x")
    with pytest.raises(FileExistsError, match="old_file.txt"):
        OOMObserver(folder=str(tmp_path)).fit_start(TrainState(run_name="r"))
    assert fake_torch.observers == [] and fake_torch.enabled is None  # refused before arming
    obs = OOMObserver(folder=str(tmp_path), overwrite=True).arm(TrainState(run_name="r"))
    assert obs.armed
    obs.close()


def test_one_torch_observer_for_many_arms(fake_torch, tmp_path, core):
    a = OOMObserver(folder=str(tmp_path / "a"), remote_file_name=None).arm(TrainState(run_name="r"))
    b = OOMObserver(folder=str(tmp_path / "b"), remote_file_name=None).arm(TrainState(run_name="r"))
    a.close()
    a.fit_start(TrainState(run_name="r"))  # re-arm after close
    assert len(fake_torch.observers) == 1
    fake_torch.oom()
    assert a.oom_count == 1 and b.oom_count == 1
    a.close(); b.close()


def test_parallel_and_sequential_rendering_agree(fake_torch, tmp_path, core):
    seq = OOMObserver(folder=str(tmp_path / "seq"), remote_file_name=None, parallel=False)
    par = OOMObserver(folder=str(tmp_path / "par"), remote_file_name=None, parallel=True)
    st = TrainState(run_name="r")
    seq.arm(st); par.arm(st)
    fake_torch.oom()
    for s in SUFFIXES[:-1]:
        with open(tmp_path / "seq" / ("rank0_oom" + s), "rb") as f1, open(tmp_path / "par" / ("rank0_oom" + s), "rb") as f2:
            assert f1.read() == f2.read(), s
    seq.close(); par.close()


def test_list_filenames_and_config():
    assert oom_mod.list_filenames("p") == ["p" + s for s in SUFFIXES[:5]]
    assert OOMObserver().filename_config["memory_flamegraph"] == "_memory_flamegraph.svg"


def test_bad_remote_scheme_fails_at_construction():
    with pytest.raises(ValueError, match="no uploader for scheme 'nosuchscheme'"):
        OOMObserver(remote_file_name="nosuchscheme://project/run")
    with pytest.raises(ValueError, match="has no bucket"):
        OOMObserver(remote_file_name="s3:///no-bucket")


def test_repeated_fit_start_fit_end_and_close(fake_torch, tmp_path, core):
    obs = OOMObserver(folder=str(tmp_path), remote_file_name=None)
    st = TrainState(run_name="r")
    for _ in range(2):
        obs.fit_start(st)
        obs.fit_end(st)
    fake_torch.oom()
    assert obs.oom_count == 1
    obs.fit_start(st)  # the folder now holds files: a later fit of the same instance writes on
    fake_torch.oom()
    assert obs.oom_count == 2
    obs.close(); obs.close()
    assert len(fake_torch.observers) == 1 and fake_torch.enabled is None


def test_capped_oom_names_limit_free_and_total(fake_torch, tmp_path, core, monkeypatch):
    """torch's observer passes the allocator's limit (not the device total)
    when set_per_process_memory_fraction is in force: the header and the
    engine's diagnosis name all three correctly."""
    import types

    import torch

    props = types.SimpleNamespace(total_memory=80 << 30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props, raising=False)
    obs = OOMObserver(folder=str(tmp_path), filename="capped", remote_file_name=None)
    runner = Callbacks(obs, run_name="r")
    runner.fit_start()
    runner.batch_start()
    fake_torch.oom(device=0, alloc=384 << 20, total=2 << 30, free=70 << 30)
    head = open(tmp_path / "capped_oom_diagnosis.txt").read().splitlines()[1]
    assert "70.0GiB free of 80.0GiB" in head and "limit is 2.0GiB" in head
    saved = pickle.load(open(tmp_path / "capped_snapshot.pickle", "rb"))
    assert saved["memsight_device_memory"] == [{"device": 0, "total": 80 << 30, "limit": 2 << 30}]
    ooms = memsight.load(tmp_path / "capped_snapshot.pickle").summary().devices[0].ooms
    for o in ooms:  # the fixture's own OOM entries, diagnosed with the recorded cap
        assert o.limit == 2 << 30 and o.device_total == 80 << 30
        assert "limit of 2.0GiB" in o.explanation
    runner.close()


def test_sizes_in_the_observer_s_lines_choose_the_unit_after_rounding():
    """The observer's log and diagnosis header print sizes as memsight's
    reports do: 1023.96 GiB is "1.0TiB", never "1024.0GiB" beside a 1 TiB
    "1.0TiB" (torch's own rule, kept by the text tools)."""
    almost = int(1023.96 * 2**30)
    assert oom_mod._size(almost) == "1.0TiB" == oom_mod._size(2**40)
    assert memsight._core.format_size(float(almost)) == "1024.0GiB"


def test_each_batch_start_marks_the_step_and_both_boundaries_poll_the_ranks(monkeypatch):
    # Batch start once had two definitions, the later (the step mark) hiding
    # the earlier (the check for other ranks' OOMs): both must run.
    calls: list[tuple] = []
    monkeypatch.setattr(oom_mod, "mark_step", lambda n: calls.append(("mark", n)))

    class Ranks:
        def poll(self):
            calls.append(("poll",))

    obs = OOMObserver(remote_file_name=None)
    obs.armed, obs._ranks = True, Ranks()
    state = TrainState(run_name="r")
    state.batch = 3
    obs._on_batch_start(state)
    obs._on_batch_end(state)
    assert calls == [("mark", 3), ("poll",), ("poll",)]
    obs.armed, obs._ranks = False, None
