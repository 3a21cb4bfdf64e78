"""What naming the holders of live tensors costs at a dump, on CPU tensors
(the walk is plain Python; on the GPU only the device filter differs).

The heap of a training process: torch imported, a model of Linear layers
whose parameters and Adam-like state (two tensors per parameter, in the
optimizer's per-parameter dicts) are tagged, and activations kept by
user code: a global list, a dict keyed by step, a frame-local list and a
closure of a forward hook. N live tensors in all (default 10,000). Timed:
``holders_value`` with the tagged storages skipped (what a dump with
``model=``/``optimizer=`` does) and with nothing skipped; medians of 5, wall
and CPU time; the collector off during each run, as a dump has it.

    python3 bench/holders_bench.py [--tensors 10000] [--ballast 0] [--gc-on] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from memsight.torch.capture import holders  # noqa: E402

kept: list[torch.Tensor] = []
cache: dict[int, torch.Tensor] = {}


def build(n: int) -> tuple[torch.nn.Module, dict, list[torch.Tensor]]:
    layers = n // 8  # 2 params + 4 states per layer: 6/8 of n
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(layers)])
    state = {p: {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)} for p in model.parameters()}
    rest = n - 6 * layers
    hooked: list[torch.Tensor] = []
    model[0].register_forward_hook(lambda m, i, o: hooked.append(o.detach()))
    local = []
    for i in range(rest):
        t = torch.zeros(4)
        (kept.append(t) if i % 4 == 0 else cache.__setitem__(i, t) if i % 4 == 1
         else hooked.append(t) if i % 4 == 2 else local.append(t))
    return model, state, local


def timed(skip: set, repeat: int, gc_on: bool) -> tuple[float, float, dict]:
    """Medians of wall and CPU time (ms): on a shared machine the CPU time
    is the walk's own, the wall time adds whatever else ran. As a dump runs
    it (holders_top_level): the collector off, so none of its passes over
    the heap lands inside the walk (``gc_on``: left on, as the first two
    passes measured); the previous run's value dropped first, so the walk
    does not index the bench's own results (a local of this frame)."""
    walls, cpus, value = [], [], {}
    for _ in range(repeat):
        if not gc_on:
            value = {}
            gc.collect()
            gc.disable()
        t, c = time.perf_counter(), time.process_time()
        value = holders.holders_value(None, skip, budget_s=10.0)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        gc.enable()
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3, value


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensors", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ballast", type=int, default=0,
                    help="this many more small dicts on the heap: a process with more libraries loaded")
    ap.add_argument("--gc-on", action="store_true",
                    help="the first passes' way: the collector on, the previous results alive during a run")
    ap.add_argument("--json")
    args = ap.parse_args()
    ballast = [{"k": [i]} for i in range(args.ballast)]
    model, state, local = build(args.tensors)
    tagged = set()
    for p in model.parameters():
        for t in (p, *state[p].values()):
            tagged.add((0, t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()))
    gc.collect()
    heap = len(gc.get_objects())
    ms_skip, cpu_skip, v_skip = timed(tagged, args.repeat, args.gc_on)
    named_skip, holders_skip = len(v_skip["storages"]), sorted(h["path"] for h in v_skip["holders"])
    if not args.gc_on:
        v_skip = {}  # the bench's own results: not for the next runs to walk
    ms_all, cpu_all, v_all = timed(set(), args.repeat, args.gc_on)
    out = {"tensors": args.tensors, "heap_objects": heap, "python": sys.version.split()[0],
           "torch": torch.__version__, "ms_tagged_skipped": round(ms_skip, 1), "ms_all": round(ms_all, 1),
           "cpu_ms_tagged_skipped": round(cpu_skip, 1), "cpu_ms_all": round(cpu_all, 1),
           "named_tagged_skipped": named_skip, "named_all": len(v_all["storages"]), "holders": holders_skip}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    assert local and len(ballast) == args.ballast  # kept alive to the end


if __name__ == "__main__":
    main()
