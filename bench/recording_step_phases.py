"""Where recording's cost falls in a training step, phase by phase (issue 37).

`recording_overhead.py` times each mode in its own process; a process's
placement moves its step time by more than recording does. This one runs
every mode in one process, alternating, on the same step (the 12-layer
transformers Llama of recording_overhead.py, AdamW, bf16 autocast), and
synchronises after each phase, so each phase's host time is its own:

  forward     the model's forward and the loss (the main thread, deep Python stacks)
  backward    loss.backward() (autograd's device thread allocates, with no Python frames)
  optimizer   opt.step() and zero_grad (the main thread, shallow stacks)

Modes: off (no history), ring (history without stacks: context=None),
torch-state, torch (context="all", stacks="python", torch's Python
unwinder), native (the same with memsight's native unwinder), native-ids
(the same with stack ids, the default). Each mode a
round warms STEPS_WARM steps (the ring fills: --max-entries is small on
purpose, so entries are overwritten as in a long run), then times --steps.
Prints per phase the median CPU ms of the process (every thread, until the
phase's last launch returns: a wait for the GPU spins) and wall ms, and the
cost above `off`. `--whole` synchronises only at the step's end (the host
runs ahead of the GPU, as in training): the whole step is then in the last
column.

    python3 bench/recording_step_phases.py [--rounds 3] [--steps 8] [--max-entries 20000] [--whole] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
MODES = ["off", "ring", "torch-state", "torch", "native", "native-ids"]
PHASES = ["forward", "backward", "optimizer"]
STEPS_WARM = 6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8, help="timed steps a mode and round")
    ap.add_argument("--max-entries", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--whole", action="store_true",
                    help="no synchronisation between phases: the step as training runs it, all of it "
                         "in the optimizer column")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import torch

    import recording_overhead as ro

    sys.path.insert(0, str(ROOT / "python"))
    from memsight.torch.capture import _native_record

    _native_record.prepare(wait=True)
    unwinder = _native_record.ready()
    if unwinder is None:
        print(f"recording_step_phases.py: no native unwinder: {_native_record.status()['error']}", file=sys.stderr)
        return 1
    w = dict(ro.WORKLOAD, batch=args.batch, seq=args.seq)
    torch.manual_seed(0)
    model, opt = ro.build(w, "cuda")
    ids = torch.randint(0, w["vocab"], (w["batch"], w["seq"]), device="cuda")
    mem = torch.cuda.memory

    def step(times: dict[str, list[float]] | None) -> None:
        marks = [(time.process_time(), time.perf_counter())]

        def mark() -> None:
            if args.whole and len(marks) < len(PHASES):  # the host runs ahead, as in training
                marks.append(marks[-1])
                return
            cpu = time.process_time()  # the host's work, before waiting (a wait spins)
            torch.cuda.synchronize()
            marks.append((cpu, time.perf_counter()))

        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        mark()
        loss.backward()
        mark()
        opt.step()
        opt.zero_grad(set_to_none=True)
        mark()
        if times is not None:
            for i, phase in enumerate(PHASES):
                times[phase + "_cpu"].append(marks[i + 1][0] - marks[i][0])
                times[phase + "_wall"].append(marks[i + 1][1] - marks[i][1])

    def run(mode: str, times: dict[str, list[float]]) -> None:
        unwinder.enable(mode.startswith("native"))
        unwinder.compact(mode == "native-ids")
        if mode == "ring":
            mem._record_memory_history("all", context=None, max_entries=args.max_entries)
        elif mode == "torch-state":
            mem._record_memory_history("all", context="state", stacks="python", max_entries=args.max_entries)
        elif mode != "off":
            mem._record_memory_history("all", context="all", stacks="python", max_entries=args.max_entries)
        try:
            for _ in range(STEPS_WARM):
                step(None)
            for _ in range(args.steps):
                step(times)
        finally:
            mem._record_memory_history(None)
            unwinder.enable(False)
            unwinder.compact(False)

    for _ in range(3):
        step(None)
    per = {m: {f"{p}_{k}": [] for p in PHASES for k in ("cpu", "wall")} for m in MODES}
    for r in range(args.rounds):
        for m in MODES[r % len(MODES):] + MODES[: r % len(MODES)]:
            run(m, per[m])
            print(f"round {r + 1}/{args.rounds} {m}", file=sys.stderr, flush=True)
    med = {m: {k: statistics.median(v) * 1e3 for k, v in per[m].items()} for m in MODES}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: {args.rounds} rounds x {args.steps} steps "
          f"a mode, one process, max_entries {args.max_entries}; ms a phase, median (above off)")
    head = "".join(f" {p + ' cpu':>16} {p + ' wall':>16}" for p in PHASES)
    print(f"{'mode':<12}{head}")
    for m in MODES:
        cells = "".join(f" {med[m][p + '_' + k]:7.2f} ({med[m][p + '_' + k] - med['off'][p + '_' + k]:+6.2f})"
                        for p in PHASES for k in ("cpu", "wall"))
        print(f"{m:<12}{cells}")
    print(f"native unwinder: {_native_record.status()['counts']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"medians_ms": med, "args": vars(args)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
