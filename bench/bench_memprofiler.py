"""Step-time overhead of MemProfiler on a real training step (a transformer
encoder with AdamW), hooks on:

- ``outside``: hooks attached, the step is not a collected iteration (the
  cost a profiled run pays in every other step);
- ``inside_hooks``: every step collected (module and saved-tensor hooks,
  host and CUDA statistics) with the files turned off;
- ``inside_files``: the same, writing the YAML and the page after each call
  (what a collected step costs as configured by default, for runs of
  ``--collected`` collected steps).

Modes alternate over rounds so drifts hit them alike; medians are reported.

    python3 bench/bench_memprofiler.py [--json OUT.json] [--device cpu --small]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

try:
    import memsight._core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from memsight.torch import MemProfiler  # noqa: E402


def make_step(device: str, d_model: int, layers: int, batch: int, seq: int):
    layer = torch.nn.TransformerEncoderLayer(d_model, nhead=max(1, d_model // 64), dim_feedforward=4 * d_model,
                                             batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, layers), torch.nn.Linear(d_model, d_model))
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, seq, d_model, device=device)

    def step() -> None:
        loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return model, step


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(step, n: int, device: str) -> float:
    sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    sync(device)
    return (time.perf_counter() - t0) / n


def profiled(model, step, folder: str, collect: bool, files: bool, n: int):
    prof = MemProfiler(
        save_dir=folder,
        collect_funcs={"default": ["step"]},
        schedule={"warmup_iters": 0 if collect else 10**9, "max_iter": n if collect else 10**9 + 1},
        dump_memorystats_yaml=files,
        write_page=files,
    ).connect(model)
    return prof, prof.profile(step, name="step")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="a tiny model (to try the script on a CPU)")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed run")
    ap.add_argument("--collected", type=int, default=20, help="collected steps per inside_files run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    dims = (128, 2, 4, 64) if args.small else (1024, 8, 16, 512)
    model, step = make_step(args.device, *dims)
    for _ in range(5):
        step()
    times: dict[str, list[float]] = {"base": [], "outside": [], "inside_hooks": [], "inside_files": []}
    modules = sum(1 for _ in model.modules())
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            times["base"].append(time_steps(step, args.steps, args.device))
            prof, fn = profiled(model, step, f"{tmp}/o{r}", collect=False, files=False, n=0)
            fn()  # the first call attaches the hooks
            times["outside"].append(time_steps(fn, args.steps, args.device))
            prof.finish()
            prof, fn = profiled(model, step, f"{tmp}/h{r}", collect=True, files=False, n=10**9)
            times["inside_hooks"].append(time_steps(fn, args.steps, args.device))
            prof.finish()
            prof, fn = profiled(model, step, f"{tmp}/f{r}", collect=True, files=True, n=args.collected)
            times["inside_files"].append(time_steps(fn, args.collected, args.device))
            prof.finish()
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["base"]
    out = {
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
        "torch": torch.__version__,
        "model": f"TransformerEncoder d_model={dims[0]} layers={dims[1]} batch={dims[2]} seq={dims[3]}, AdamW",
        "modules_hooked": modules,
        "step_ms": round(base * 1e3, 3),
    }
    for k in ("outside", "inside_hooks", "inside_files"):
        out[f"{k}_step_ms"] = round(med[k] * 1e3, 3)
        out[f"{k}_overhead_ms"] = round((med[k] - base) * 1e3, 3)
        out[f"{k}_overhead_pct"] = round((med[k] - base) / base * 100, 2)
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
