"""Recording state is restored, and memsight's users never switch each other off."""

from __future__ import annotations

from gpu_helpers import make_model, train_step


def _enabled():
    import torch

    return bool(torch._C._cuda_isHistoryEnabled())


def test_record_restores_off_and_captures_python_stacks(tmp_path):
    import memsight
    import memsight.torch as mt

    model, opt = make_model(width=256)
    assert not _enabled()
    with mt.record(max_entries=10_000, stacks="python"):
        assert _enabled()
        train_step(model, opt, width=256)
        taken = mt.snapshot()  # (each _snapshot() call adds a 'snapshot' entry: dump one)
        path = mt.dump(tmp_path / "step.pickle.gz", taken)
        zst = mt.dump(tmp_path / "step.pickle.zst", taken)
        plain = mt.dump(tmp_path / "now.pickle")
    assert not _enabled()
    assert memsight.load(plain).trace_entry_count > 0
    snap = memsight.load(path)
    assert snap.trace_entry_count > 10
    assert memsight.load(zst).to_dict() == snap.to_dict()
    d = snap.to_dict()
    frames = [f for t in d["device_traces"] for e in t for f in e.get("frames", [])]
    assert any(f["filename"].endswith("gpu_helpers.py") for f in frames)
    assert all(not f["filename"].endswith((".cpp", ".h")) for f in frames)  # python stacks only
    assert snap.memory().total >= 0 and snap.stats()


def test_external_recording_is_left_on(tmp_path):
    import torch

    import memsight.torch as mt

    torch.cuda.memory._record_memory_history("all", max_entries=1000)
    with mt.record(max_entries=5000):
        assert _enabled()
    assert _enabled()  # memsight did not start it, so it does not stop it
    torch.cuda.memory._record_memory_history(None)


def test_nested_and_interleaved_users(tmp_path):
    import torch

    import memsight.torch as mt
    from memsight.torch import OOMObserver

    obs = OOMObserver(folder=str(tmp_path / "o"), remote_file_name=None)
    obs.fit_start()
    a = mt.start_recording(max_entries=50_000, stacks="python")
    with mt.record(max_entries=1000, context="alloc"):
        model, opt = make_model(width=256)
        train_step(model, opt, width=256)
    assert _enabled()
    before = len(torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()])
    mt.stop_recording(a)
    assert _enabled()  # the OOM observer still records
    train_step(model, opt, width=256)
    after = len(torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()])
    assert after > before  # history kept across the change of options, and still growing
    obs.close()
    assert not _enabled()
    assert mt.recorder.owners() == []
