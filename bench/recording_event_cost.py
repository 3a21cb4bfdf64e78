"""What recording costs one allocator event, by part (issue 37, item 1).

A training step hides the host's cost behind the GPU and varies from
process to process; this loop isolates it. In one process, a Python call
chain DEPTH frames deep allocates and frees a small CUDA tensor N times
(each iteration: alloc, free_requested, free_completed = 3 events), under
each mode in turn, the modes alternating for several rounds:

  off          no history
  ring         history with no stacks (context=None): torch's ring buffer and entries
  torch-state  context="state", stacks="python", torch's Python unwinder (stacks of live blocks only)
  torch        context="all", stacks="python", torch's Python unwinder
  native       the same with memsight's native unwinder, every frame kept (no stack ids)
  native-ids   the same with stack ids (the default: one frame an event)
  torch-cpp    context="all", stacks="all" (C++ frames too), torch's unwinder
  native-cpp   the same with memsight's native unwinder

Prints ns an iteration (median of rounds) and the cost above `off` per event.
`--kind backward` times a tiny forward and backward instead: the gradients
are allocated on autograd's device thread, which has no Python frames.

    python3 bench/recording_event_cost.py [--n 20000] [--rounds 5] [--depth 30] [--kind alloc|backward] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ["off", "ring", "torch-state", "torch", "native", "native-ids", "torch-cpp", "native-cpp"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="iterations a round and mode")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--depth", type=int, default=30, help="Python frames above each allocation")
    ap.add_argument("--kind", choices=("alloc", "backward"), default="alloc",
                    help="alloc: allocate and free on this thread; backward: a tiny forward and backward, "
                         "whose gradients autograd's thread allocates (events counted, not assumed)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import torch

    sys.path.insert(0, str(ROOT / "python"))
    from memsight.torch.capture import _native_record

    mem = torch.cuda.memory
    _native_record.prepare(wait=True)
    unwinder = _native_record.ready()
    if unwinder is None:
        print(f"recording_event_cost.py: no native unwinder: {_native_record.status()['error']}", file=sys.stderr)
        return 1

    w = torch.ones(256, device="cuda", requires_grad=True)

    def loop(n: int) -> float:
        t = time.perf_counter()
        if args.kind == "alloc":
            for _ in range(n):
                x = torch.empty(256, device="cuda")
                del x
        else:  # the backward's allocations are made on autograd's device thread
            for _ in range(n):
                (w * 2).sum().backward()
                w.grad = None
        return time.perf_counter() - t

    def at_depth(k: int, n: int) -> float:
        return loop(n) if k == 0 else at_depth(k - 1, n)

    def run(mode: str) -> float:
        unwinder.enable(mode.startswith("native"))
        unwinder.compact(mode == "native-ids")
        stacks = "all" if mode.endswith("cpp") else "python"
        if mode == "ring":
            mem._record_memory_history("all", context=None, max_entries=100_000)
        elif mode == "torch-state":
            mem._record_memory_history("all", context="state", stacks=stacks, max_entries=100_000)
        elif mode != "off":
            mem._record_memory_history("all", context="all", stacks=stacks, max_entries=100_000)
        try:
            at_depth(args.depth, 2000)  # warm: the stack is resolved, the ring is full
            return at_depth(args.depth, args.n) / args.n
        finally:
            mem._record_memory_history(None)
            unwinder.enable(False)
            unwinder.compact(False)

    torch.cuda.init()
    at_depth(args.depth, 1000)
    stats = torch.cuda.memory_stats()
    before = stats.get("allocation.all.allocated", 0) + stats.get("allocation.all.freed", 0)
    at_depth(args.depth, 1000)
    stats = torch.cuda.memory_stats()
    # allocations an iteration (each freed again): three history entries each
    # (alloc, free_requested, free_completed)
    allocs = (stats.get("allocation.all.allocated", 0) + stats.get("allocation.all.freed", 0) - before) / 2000
    events = 3 * allocs
    per: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(args.rounds):
        for m in MODES[r % len(MODES):] + MODES[: r % len(MODES)]:
            per[m].append(run(m))
    base = statistics.median(per["off"])
    rows = {}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Python {sys.version.split()[0]}: "
          f"{args.n} iterations x {args.rounds} rounds, {args.depth} frames deep, {args.kind}: "
          f"{events:.1f} events an iteration")
    print(f"{'mode':<12} {'ns/iter':>9} {'min-max':>17} {'ns/event over off':>18}")
    for m in MODES:
        med = statistics.median(per[m])
        rows[m] = {"ns_per_iteration": med * 1e9, "spread_ns": [min(per[m]) * 1e9, max(per[m]) * 1e9],
                   "ns_per_event_over_off": (med - base) * 1e9 / events}
        print(f"{m:<12} {med * 1e9:9.0f} {min(per[m]) * 1e9:8.0f}-{max(per[m]) * 1e9:<8.0f} "
              f"{rows[m]['ns_per_event_over_off']:18.0f}")
    print("native unwinder:", unwinder.counts())
    if args.json:
        Path(args.json).write_text(json.dumps({"n": args.n, "rounds": args.rounds, "depth": args.depth,
                                               "kind": args.kind, "events_per_iteration": events,
                                               "modes": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
