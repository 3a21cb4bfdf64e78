"""The estimate against real runs (issue 36): the same step estimated under
fake tensors (no GPU memory used) and run on the GPU in a fresh process;
torch's own peaks are the truth. The full table of workloads, real limits
and max_batch is bench/estimate_check.py's (docs/estimate.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
BENCH = HERE.parent.parent / "bench" / "estimate_check.py"

import memsight.torch as mt  # noqa: E402
from estimate_workloads import WORKLOADS  # noqa: E402


def _real(name: str, tmp_path: Path, batch: int, fraction: float = 0.0, record: bool = True) -> dict | None:
    what = "real" if record else "probe"
    p = subprocess.run([sys.executable, str(BENCH), what, "--workload", name, "--batch", str(batch), "--steps", "2",
                        "--fraction", str(fraction), "--out", str(tmp_path)], capture_output=True, text=True)
    if not record:
        assert p.returncode in (0, 3), p.stderr[-3000:]
        return {"fits": p.returncode == 0}
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((tmp_path / f"{name}.real.json").read_text())


def _estimate(name: str, batch: int, **kw):
    w = WORKLOADS[name]
    return mt.estimate(w.step, w.model, w.optimizer, lambda i: w.inputs(batch, i), world_size=w.world_size or None,
                       **kw)


@pytest.mark.parametrize("name", ["llama_adamw_bf16", "resnet50_sgd", "llama_fsdp2_rank"])
def test_estimated_peaks_are_torchs_within_3_and_5_percent(name, tmp_path):
    w = WORKLOADS[name]
    before = torch.cuda.memory_allocated()
    est = _estimate(name, w.batch)
    used = torch.cuda.memory_allocated() - before
    real = _real(name, tmp_path, w.batch)
    print(f"{name}: allocated {est.peak_allocated:,} vs torch {real['max_allocated']:,}; "
          f"reserved {est.peak_reserved:,} vs torch {real['max_reserved']:,}; "
          f"GPU memory the estimate used: {used:,} B; {est.seconds:.1f} s")
    assert used < 1 << 20  # fake tensors: nothing of the model's size on the GPU
    assert est.peak_allocated == pytest.approx(real["max_allocated"], rel=0.03)
    assert est.peak_reserved == pytest.approx(real["max_reserved"], rel=0.05)
    assert est.terms and est.terms[0]["name"] == "cuBLAS workspace"
    assert "peak reserved" in str(est)


def test_the_verdict_is_the_real_runs_on_both_sides_of_a_cap(tmp_path):
    # A cap just above what batch 8 really reserves: batch 8 fits, batch 12
    # does not, on the GPU and in the estimate.
    name = "llama_adamw_bf16"
    real8 = _real(name, tmp_path, 8)
    total = torch.cuda.mem_get_info()[1]
    fraction = (real8["max_reserved"] + (64 << 20)) / total
    for batch in (8, 12):
        fits = _real(name, tmp_path, batch, fraction=fraction, record=False)["fits"]
        est = _estimate(name, batch, device_memory=total, memory_fraction=fraction, stacks=False)
        print(f"batch {batch}: GPU {'fits' if fits else 'OOM'}, estimate {'fits' if est.fits else 'OOM'}")
        assert est.fits == fits == (batch == 8)


def test_calibrated_from_two_small_real_runs(tmp_path):
    # Recordings at batch 2 and 4 give every request as a line in the batch:
    # batch 8 then comes out as torch's own, workspaces included.
    import pickle

    name = "llama_adamw_bf16"
    snaps = {}
    for b in (2, 4):
        d = tmp_path / str(b)
        d.mkdir()
        _real(name, d, b)
        snaps[b] = pickle.loads((d / f"{name}.real.pickle").read_bytes())
    real8 = _real(name, tmp_path, 8)
    est = mt.Estimate.from_requests(mt.calibrate(snaps[2], 2, snaps[4], 4, 8))
    print(f"calibrated: allocated {est.peak_allocated:,} vs torch {real8['max_allocated']:,}; "
          f"reserved {est.peak_reserved:,} vs torch {real8['max_reserved']:,}")
    assert est.peak_allocated == pytest.approx(real8["max_allocated"], rel=0.03)
    assert est.peak_reserved == pytest.approx(real8["max_reserved"], rel=0.05)
