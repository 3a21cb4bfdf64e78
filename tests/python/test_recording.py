"""The shared, reference-counted recorder: requests combine, and stopping
one never turns off another's recording (run for real in tests/gpu)."""

from __future__ import annotations

import gzip
import lzma
import pickle

import pytest

import memsight.torch as mt
from memsight.torch.capture import recording
from memsight.torch.capture.recording import RecordOptions, merge_options


def test_merge_takes_the_union():
    m = merge_options([
        RecordOptions(context="alloc", stacks="python", max_entries=10, skip_actions={"snapshot", "oom"}),
        RecordOptions(enabled="state", context="all", stacks="all", max_entries=5, skip_actions={"snapshot"}),
    ])
    assert m == RecordOptions(enabled="all", context="all", stacks="all", max_entries=10,
                              skip_actions=frozenset({"snapshot"}))


@pytest.mark.parametrize("bad", [{"enabled": "yes"}, {"context": "some"}, {"stacks": "cpp"}, {"max_entries": 0}])
def test_options_are_validated(bad):
    with pytest.raises(ValueError):
        RecordOptions(**bad)


def test_record_context_manager_restores_off(fake_torch):
    with mt.record(max_entries=1234, stacks="python") as rec:
        assert rec.active
        assert fake_torch.enabled == "all"
        assert fake_torch.options == {"context": "all", "stacks": "python", "max_entries": 1234}
    assert fake_torch.enabled is None
    assert not rec.active


def test_nested_requests_widen_then_restore(fake_torch):
    outer = mt.start_recording(max_entries=100, context="alloc")
    with mt.record(max_entries=1000, context="all", stacks="all"):
        assert fake_torch.options == {"context": "all", "stacks": "all", "max_entries": 1000}
    assert fake_torch.enabled == "all"
    assert fake_torch.options == {"context": "alloc", "stacks": "python", "max_entries": 100}
    mt.stop_recording()
    assert fake_torch.enabled is None
    assert not outer.active
    mt.stop_recording()  # nothing left: no error


def test_the_native_unwinder_is_told_when_cpp_frames_are_recorded(fake_torch, monkeypatch):
    # Stack ids (one frame for a whole stack) only while no recording takes
    # C++ frames: torch places Python frames among those one by one.
    told = []
    monkeypatch.setattr(recording._native_record, "set_recording",
                        lambda on, cpp_frames=False: told.append((on, cpp_frames)))
    outer = mt.start_recording(stacks="python")
    with mt.record(stacks="all"):
        assert told[-1] == (True, True)
    assert told[-1] == (True, False)
    mt.stop_recording(outer)
    assert told == [(True, False), (True, True), (True, False), (False, False)]


def test_stopping_one_user_keeps_the_others_recording(fake_torch):
    a = mt.Recording(max_entries=50, owner="OOMObserver").start()
    b = mt.Recording(max_entries=50, owner="MemorySnapshot").start()
    assert recording.recorder.owners() == ["OOMObserver", "MemorySnapshot"]
    calls_before = len(fake_torch.calls)
    b.stop()
    assert fake_torch.enabled == "all"  # still on for the OOM observer
    assert len(fake_torch.calls) == calls_before  # same merged options: torch not called again
    b.stop()  # idempotent
    a.stop()
    assert fake_torch.enabled is None


def test_recording_started_outside_memsight_is_left_on(fake_torch):
    fake_torch.record_memory_history("all", context="alloc", stacks="all", max_entries=7)
    with mt.record(max_entries=100):
        assert fake_torch.options["max_entries"] == 100
    assert fake_torch.enabled == "all"  # memsight never turns off what it did not start


def test_snapshot_and_dump_formats(fake_torch, tmp_path):
    snap = mt.snapshot()
    assert set(snap) >= {"segments", "device_traces"}
    plain = mt.dump(tmp_path / "s.pickle")
    gz = mt.dump(tmp_path / "s.pickle.gz", snap)
    xz = mt.dump(tmp_path / "sub" / "s.pickle.xz", snap)
    with open(plain, "rb") as f:
        assert f.read(2) == b"\x80\x04"  # protocol 4, as torch's viewer reads
    with open(plain, "rb") as f:
        assert pickle.load(f) == snap
    with gzip.open(gz, "rb") as f:
        assert pickle.load(f) == snap
    with lzma.open(xz, "rb") as f:
        assert pickle.load(f) == snap
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.pickle", "s.pickle.gz", "sub"]  # no temp files left


def test_dump_zstd_goes_through_the_engine(fake_torch, tmp_path, core):
    import memsight

    snap = mt.snapshot()
    path = mt.dump(tmp_path / "s.pickle.zst", snap)
    with open(path, "rb") as f:
        assert f.read(4) == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    assert memsight.load(path).to_dict() == snap
