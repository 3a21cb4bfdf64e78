"""bench/recording_overhead.py off the GPU: its arguments, one child on a tiny
CPU model, and the table from synthetic rounds (the GPU run is the
coordinator's; its figures are in bench/README.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "recording_overhead.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("recording_overhead", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_child_times_its_steps_on_a_tiny_cpu_model(bench, capsys):
    pytest.importorskip("torch")
    assert bench.main(["--mode", "memsight", "--dry-run", "--steps", "3", "--warmup", "1"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["mode"] == "memsight" and len(result["step_s"]) == 3 and result["device"] == "cpu"


def test_the_table_from_synthetic_rounds(bench):
    def rounds(ms, events=1000):
        return [{"mode": "x", "step_s": [m / 1e3] * 4, "events_per_step": events} for m in ms]

    runs = {"none": rounds([50, 51, 52]), "torch": rounds([65, 66, 64]),
            "memsight": rounds([66]) + [{"mode": "memsight", "error": "no result in 300 s"}], "native": []}
    rows = bench.summarise(runs, {"native": "memsight.torch has no native recorder yet (native_record)"})
    assert rows["none"]["median_ms"] == pytest.approx(51) and rows["none"]["spread_ms"] == pytest.approx([50, 52])
    assert rows["torch"]["overhead"] == pytest.approx(65 / 51 - 1)
    assert rows["torch"]["us_per_event"] == pytest.approx(14.0)  # 14 ms over 1000 events
    assert rows["memsight"]["rounds"] == 1 and rows["memsight"]["errors"] == ["no result in 300 s"]
    text = bench.table(rows)
    assert "torch                   65.00 64.00-66.00      64.00-66.00         +27.5%        1000    14.00" in text
    assert "native               skipped: memsight.torch has no native recorder yet" in text


def test_a_mode_it_does_not_know_is_refused(bench, capsys):
    assert bench.main(["--modes", "none,torch-everything"]) == 2
    assert "unknown mode 'torch-everything'" in capsys.readouterr().err


def test_the_unwinder_gather_bench_times_every_mode(capsys):
    import shutil
    import sys
    import sysconfig

    if not ((3, 11) <= sys.version_info[:2] <= (3, 12)) or shutil.which("g++") is None \
            or not (Path(sysconfig.get_paths()["include"]) / "internal" / "pycore_frame.h").is_file():
        pytest.skip("the unwinder reads CPython 3.11/3.12 frames; needs g++ and Python's internal headers")
    spec = importlib.util.spec_from_file_location("unwinder_gather_bench", SCRIPT.parent / "unwinder_gather_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--depth", "5", "--n", "20", "--ring", "10", "--rounds", "1", "--pollute", "8"]) == 0
    out = capsys.readouterr().out
    for mode in module.MODES:  # each mode timed with and without other memory written between gathers
        rows = [line.split() for line in out.splitlines() if line.split()[:1] == [mode]]
        assert len(rows) == 2 and all(float(r[1]) > 0 for r in rows), out
