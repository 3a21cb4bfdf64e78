"""Snapshot.whatif() gives what `memsight whatif` gives: the same simulation,
the same text, the same JSON, and the same refusals."""

from __future__ import annotations

import json

import pytest

import memsight
from memsight_testlib import DATA, cli

pytestmark = pytest.mark.usefixtures("core")


def test_the_standard_alternatives_are_the_clis():
    snap = memsight.load(DATA / "transformer_train.pickle")
    w = snap.whatif()
    assert w == json.loads(cli("whatif", "--json", DATA / "transformer_train.pickle"))
    assert str(w) == cli("whatif", DATA / "transformer_train.pickle").decode()
    (dev,) = w.devices
    assert dev.self_check.ok
    peaks = [r.peak_reserved for r in dev.results]
    assert peaks == sorted(peaks) and len(peaks) > 5
    assert dev.results[0].settings == "expandable_segments:True"


def test_settings_memory_and_cap_are_the_clis():
    path = DATA / "oom.pickle"
    snap = memsight.load(path)
    w = snap.whatif("expandable_segments:True", "max_split_size_mb:128")
    assert w == json.loads(cli("whatif", "--json", "--set", "expandable_segments:True",
                               "--set", "max_split_size_mb:128", path))
    (r,) = w.devices[0].results
    assert r.settings == "expandable_segments:True,max_split_size_mb:128"
    capped = snap.whatif("expandable_segments:True", device_memory=80 << 30, memory_fraction=0.025)
    assert capped == json.loads(cli("whatif", "--json", "--set", "expandable_segments:True",
                                    "--device-memory", str(80 << 30), "--memory-fraction", "0.025", path))
    memory = capped.devices[0].memory
    assert memory.total == 80 << 30 and not memory.limit_inferred
    assert w.devices[0].memory.limit_inferred  # without the fraction, inferred from the recorded OOM


def test_bad_settings_are_refused_before_any_simulation():
    snap = memsight.load(DATA / "oom.pickle")
    with pytest.raises(memsight.MemsightError, match="unknown allocator setting 'foo'"):
        snap.whatif("foo:1")
    with pytest.raises(memsight.MemsightError, match="takes True or False"):
        snap.whatif("expandable_segments:maybe")
    for bad in ("", 3, None):
        with pytest.raises(ValueError, match="KEY:VALUE"):
            snap.whatif(bad)
    for bad in (0, -1, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match="memory_fraction"):
            snap.whatif(memory_fraction=bad)
    for bad in (0, -5, 1.5, True, 80, "80", "lots", "-1G"):
        with pytest.raises(ValueError, match="device_memory"):
            snap.whatif(device_memory=bad)
    # A size with a unit reads as the CLI reads it.
    by_unit, by_bytes = snap.whatif(device_memory="80G"), snap.whatif(device_memory=80 << 30)
    assert str(by_unit) == str(by_bytes) and by_unit == by_bytes
    with pytest.raises(memsight.MemsightError, match="trace=False"):
        memsight.load(DATA / "oom.pickle", trace=False).whatif()
