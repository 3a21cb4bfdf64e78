"""What telling memory kinds costs a training job, on the GPU.

A real training step (a 12-layer, d=1024 transformer, batch 8 x 1024
tokens, AdamW, bf16 autocast), timed one step at a time (synchronised),
in blocks of 10 steps that alternate between:

  history   allocator history recorded (stacks="python"), no model handed over;
  tagged    the same, with memsight.torch.record(model=, optimizer=): phase
            marks on the model's blocks (the default) and the step;
  modules   the same with MEMSIGHT_PHASE_MARKS=modules: marks on every module;
  plain     nothing recorded (for scale).

The tagging cost is median(tagged) / median(history) - 1, over >= 50 steps
each (target <= 1%, bench/README.md). Also the time to tag the storages at
dump time (once per snapshot) and how much the tags add to the pickle.

    python3 bench/tagging_bench.py [--steps 60] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import os
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

import torch

try:
    import memsight._core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import memsight.torch as mt  # noqa: E402
from memsight.torch.capture import phase_marks, tags  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gpu"))
from test_categories_gpu import lm_step, transformer  # noqa: E402


def timed(step) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    step()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60, help="steps per configuration (>= 50)")
    ap.add_argument("--json")
    args = ap.parse_args()
    model = transformer(layers=12, d=1024, heads=16, vocab=32000)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        lm_step(model, opt, set_to_none=True, batch=8, seq=1024, vocab=32000)

    for _ in range(3):  # warm up: cuBLAS, the optimizer's state
        step()
    configs = {
        "plain": lambda: None,
        "history": lambda: mt.record(max_entries=200_000, stacks="python"),
        "tagged": lambda: mt.record(max_entries=200_000, stacks="python", model=model, optimizer=opt),
        "modules": lambda: mt.record(max_entries=200_000, stacks="python", model=model, optimizer=opt),
    }
    times: dict[str, list[float]] = {k: [] for k in configs}
    modules = sum(1 for _ in model.modules())
    while min(len(v) for v in times.values()) < args.steps:
        for name, make in configs.items():
            ctx = make()
            os.environ["MEMSIGHT_PHASE_MARKS"] = "modules" if name == "modules" else "blocks"
            if ctx is not None:
                ctx.start()
            try:
                step()  # the first step of a block pays for turning things on
                times[name] += [timed(step) for _ in range(10)]
            finally:
                if ctx is not None:
                    ctx.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    cost = med["tagged"] / med["history"] - 1
    os.environ["MEMSIGHT_PHASE_MARKS"] = "blocks"
    with mt.record(max_entries=200_000, stacks="python", model=model, optimizer=opt):
        step()
        torch.cuda.synchronize()
        t = time.perf_counter()
        value = tags.tags_value()
        tag_ms = (time.perf_counter() - t) * 1e3
        marks = tags.marker_kind() or "none"
        raw = mt.snapshot()
    with_tags = len(pickle.dumps(raw, protocol=4))
    raw.pop("memsight_tags")
    without = len(pickle.dumps(raw, protocol=4))
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "marks": marks,
        "modules": modules,
        "marked_blocks": len(phase_marks.marked_modules(model)),
        "steps_each": {k: len(v) for k, v in times.items()},
        "median_step_s": med,
        "tagging_cost": cost,
        "modules_cost": med["modules"] / med["history"] - 1,
        "history_cost": med["history"] / med["plain"] - 1,
        "tag_storages": len(value["storages"]),
        "tag_ms": tag_ms,
        "pickle_bytes": {"with_tags": with_tags, "without": without},
    }
    print(json.dumps(result, indent=1))
    print(f"\ntagging: {cost * 100:+.2f}% of a {med['history'] * 1e3:.1f} ms step "
          f"(median of {len(times['tagged'])} steps each; target <= 1%); every module marked: "
          f"{result['modules_cost'] * 100:+.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0 if cost <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
