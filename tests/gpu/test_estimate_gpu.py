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


def _inside(run) -> list[int]:
    """The sizes torch's allocator gave out while ``run()`` ran, less the
    sizes of the tensors it returned: what the kernels took for themselves."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100_000, context=None, stacks="python")
    try:
        out = run()
        torch.cuda.synchronize()
        trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    sizes = [e["size"] for e in trace if e["action"] == "alloc"]
    for t in out if isinstance(out, tuple) else (out,):
        if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes():
            size = t.untyped_storage().nbytes()
            sizes.remove(next(s for s in sizes if s >= size and s - size < 512))
    return sorted(sizes)


@pytest.mark.parametrize("case", [
    ((6304, 768), None, [0], torch.float32),     # ViT-B/16's bias gradients at batch 32
    ((6304, 3072), None, [0], torch.float32),
    ((8274, 2304), None, [0], torch.float32),
    ((8192, 4096), None, [0], torch.bfloat16),
    ((4, 197, 768), None, [0, 1], torch.float32),
    ((100, 30), None, [0], torch.float32),       # too short to split: nothing
    ((768, 6304), "t", [0], torch.float32),      # along the fastest dimension
    ((32, 197, 768), None, None, torch.float32),  # everything: a loss's mean
])
def test_a_reductions_staging_buffers_are_torchs(case):
    from memsight.torch.fit.terms import _device_sms, reduction_buffers

    shape, layout, dims, dtype = case
    x = torch.randn(shape, device="cuda", dtype=dtype)
    if layout == "t":
        x = torch.randn(shape[::-1], device="cuda", dtype=dtype).t()
    real = _inside(lambda: x.sum(dims) if dims is not None else x.mean())
    want = reduction_buffers(list(x.shape), list(x.stride()), dims, 4, _device_sms())
    assert real == sorted(n for n in want if n), (case, real, want)  # the requests, to the byte


def test_a_layer_norms_backward_copies_a_gradient_that_arrives_transposed():
    x = torch.randn(197, 32, 768, device="cuda").transpose(0, 1)  # as nn.MultiheadAttention hands it back
    w, b = torch.ones(768, device="cuda"), torch.zeros(768, device="cuda")
    _, mean, rstd = torch.ops.aten.native_layer_norm(x.contiguous(), [768], w, b, 1e-5)
    grad = torch.randn(197, 32, 768, device="cuda").transpose(0, 1)
    real = _inside(lambda: torch.ops.aten.native_layer_norm_backward(grad, x, [768], mean, rstd, w, b,
                                                                     [True, True, True]))
    assert real == [x.numel() * 4, grad.numel() * 4], real


def test_a_layer_norm_copies_an_input_that_is_not_contiguous():
    x = torch.randn(197, 32, 768, device="cuda").transpose(0, 1)
    w, b = torch.ones(768, device="cuda"), torch.zeros(768, device="cuda")
    real = _inside(lambda: torch.ops.aten.native_layer_norm(x, [768], w, b, 1e-5))
    assert real == [x.numel() * 4], real
