"""memsight.diff() and Snapshot.leaks() give what the CLI gives;
memsight.torch.mark_step() marks steps as the engine reads them; the OOM
observer's diagnosis mentions a leak when the history it dumped shows one."""

from __future__ import annotations

import json
import pickle
import sys
import types

import pytest

import memsight
from memsight_testlib import DATA, cli

sys.path.insert(0, str(DATA))
import make_leaks as ml  # noqa: E402

pytestmark = pytest.mark.usefixtures("core")

@pytest.fixture
def graph(tmp_path):
    f = tmp_path / "graph.pickle"
    f.write_bytes(pickle.dumps(ml.loop(steps=30, keep_loss=True, keep_output=True), protocol=4))
    return f


def test_diff_of_two_paths_is_the_clis(graph):
    d = memsight.diff(DATA / "mlp_train.pickle", DATA / "oom.pickle")
    assert d.data == json.loads(cli("diff", "--json", DATA / "mlp_train.pickle", DATA / "oom.pickle"))
    assert str(d) == cli("diff", DATA / "mlp_train.pickle", DATA / "oom.pickle").decode()
    assert d.data.change.allocated == sum(s.change for s in d.data.sites)
    assert "+1590743040 bytes" in repr(d)


def test_diff_of_two_moments(graph):
    snap = memsight.load(graph)
    d = memsight.diff(snap, at_step=(5, 25))
    assert d.data == json.loads(cli("diff", "--json", graph, "--at-step", "5", "--at-step", "25"))
    assert {s.site: s.change for s in d.data.sites if s.change} == {ml.OUTPUT_SITE: 20 << 20, ml.LOSS_SITE: 20 * 512}
    assert memsight.diff(snap, at=("step:5", "step:25")).data == d.data
    assert memsight.diff(snap, at=-1).data.before.event == -1


def test_diff_outputs(graph, tmp_path):
    d = memsight.diff(graph, at_step=5)
    cli("diff", graph, "--at-step", "5", "-o", tmp_path / "x.folded")
    cli("diff", graph, "--at-step", "5", "-o", tmp_path / "x.svg")
    assert d.folded() == (tmp_path / "x.folded").read_text()
    assert d.folded().startswith("grew;")
    assert d.svg() == (tmp_path / "x.svg").read_text()
    page = d.to_html(tmp_path / "d.html")
    assert "<svg" in open(page).read()


def test_diff_refusals(tmp_path):
    r0, r1 = tmp_path / "rank0_a.pickle", tmp_path / "rank1_a.pickle"
    r0.write_bytes((DATA / "oom.pickle").read_bytes())
    r1.write_bytes((DATA / "oom.pickle").read_bytes())
    with pytest.raises(memsight.MemsightError, match="different ranks; pass allow_mismatch=True"):
        memsight.diff(r0, r1)
    assert memsight.diff(r0, r1, allow_mismatch=True).data.change.allocated == 0
    with pytest.raises(memsight.MemsightError, match="different GPUs"):
        memsight.diff(DATA / "two_devices.pickle", DATA / "oom.pickle", device=(1, 0))
    with pytest.raises(memsight.MemsightError, match="needs a moment"):
        memsight.diff(DATA / "oom.pickle")
    with pytest.raises(ValueError, match="not both"):
        memsight.diff(DATA / "oom.pickle", at=1, at_step=2)
    with pytest.raises(ValueError, match="one moment or two"):
        memsight.diff(DATA / "oom.pickle", at=(1, 2, 3))
    with pytest.raises(memsight.MemsightError, match="trace entry 99999 is not in device 0's trace"):
        memsight.diff(DATA / "oom.pickle", at=99999)


def test_leaks_is_the_clis(graph):
    snap = memsight.load(graph)
    leaks = snap.leaks()
    assert leaks == json.loads(cli("leaks", "--json", graph))
    assert str(leaks) == cli("leaks", graph).decode()
    (dev,) = leaks.devices
    assert dev.verdict == "leak" and dev.allocated_at.site == ml.LOSS_SITE
    assert [s.site for s in dev.sites] == [ml.OUTPUT_SITE, ml.LOSS_SITE]
    none = memsight.load(DATA / "mlp_train.pickle").leaks()
    assert none.devices[0].verdict == "too few iterations"


def test_mark_step_records_one_annotation_a_step(monkeypatch):
    from memsight.torch.capture import phase_marks

    names: list[str] = []

    class RecordFunction:
        def __init__(self, name):
            names.append(name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    torch = types.ModuleType("torch")
    torch.autograd = types.SimpleNamespace(profiler=types.SimpleNamespace(record_function=RecordFunction))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(phase_marks, "_next_step", 0)
    monkeypatch.setattr(phase_marks, "_step_failed", False)
    assert [memsight.torch.mark_step() for _ in range(3)] == [0, 1, 2]
    assert memsight.torch.mark_step(10) == 10 and memsight.torch.mark_step() == 11
    assert names == ["memsight:step:0", "memsight:step:1", "memsight:step:2", "memsight:step:10",
                     "memsight:step:11"]

    def broken(name):
        raise RuntimeError("no profiler here")

    torch.autograd.profiler.record_function = broken
    assert memsight.torch.mark_step() == 12  # logged, never raised
    assert phase_marks._step_failed


@pytest.mark.parametrize("leaky", [True, False])
def test_oom_diagnosis_mentions_a_leak(fake_torch_with, tmp_path, leaky):
    alloc = fake_torch_with(ml.loop(steps=12, keep_loss=leaky))
    obs = memsight.torch.OOMObserver(folder=str(tmp_path), filename="oom", remote_file_name=None)
    runner = memsight.torch.Callbacks(obs, run_name="r")
    runner.fit_start()
    runner.batch_start()
    alloc.oom()
    text = (tmp_path / "oom_oom_diagnosis.txt").read_text()
    assert ("Memory grew from step to step before the OOM" in text) == leaky
    assert ("Allocated at: train.py:45:train_step" in text) == leaky
    runner.close()
