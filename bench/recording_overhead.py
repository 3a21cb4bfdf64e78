"""What recording the allocator's history costs a training step (issue 37).

The workload: a 12-layer transformers Llama built from a config (hidden
1024, MLP 2816, 16 heads, vocab 32000: about 220M parameters, fp32
weights), batch 8 x 1024 tokens, AdamW, bf16 autocast; about 50 ms a step
on an H200 (the `none` row says what it was).

Every mode runs in a fresh process (this script with `--mode NAME`), the
modes alternate (the order rotates every round), and each of >= 3 rounds
times N steps one at a time (synchronised) after the warm-up steps, with
recording already on during the warm-up. Per mode: the median of the round
medians, their spread (min-max), p10-p90 over every timed step, the
overhead against `none`, and the allocator's events a step (allocations and
frees, from memory_stats) with the overhead per event, and the host's CPU
time a step (every thread, from the step's start until its last launch
returns, before waiting for the GPU): a step that waits on the GPU hides
what recording costs the host, and the CPU columns show it.

Modes (every recording keeps --max-entries entries):

  none                 nothing recorded
  torch                torch.cuda.memory._record_memory_history(context="all", stacks="python")
  torch-alloc          the same with context="alloc"
  torch-state          the same with context="state"
  torch-stacks-all     context="all", stacks="all" (C++ frames too)
  memsight, memsight-alloc, memsight-state, memsight-stacks-all
                       memsight.torch.record(...) with the same options
                       (MEMSIGHT_NATIVE_RECORD=0: torch's recording under it)
  memsight-handed      memsight.torch.record(model=, optimizer=): phase marks and tags too
  native, native-alloc, native-stacks-all
                       memsight.torch.native_record(...) with the options of torch,
                       torch-alloc and torch-stacks-all: torch's recording with
                       memsight's native Python unwinder (waits until it is built
                       and checked; skipped with a note where it cannot be)
  native-nodump        native with MEMSIGHT_NATIVE_DUMP=0: no native dumper built, checked
                       and warmed in the background

    python3 bench/recording_overhead.py [--rounds 3] [--steps 40] [--json OUT.json]
    python3 bench/recording_overhead.py --quick     # none, torch, memsight, native: < 2 min on an H200
    python3 bench/recording_overhead.py --dry-run   # a tiny model on the CPU, nothing recorded: checks the script

All 11 modes x 3 rounds x 40 steps take about 7 minutes on an H200 (most of
it starting processes); `--modes a,b` runs some of them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = dict(layers=12, hidden=1024, intermediate=2816, heads=16, vocab=32000, batch=8, seq=1024)
DRY_WORKLOAD = dict(layers=2, hidden=64, intermediate=128, heads=4, vocab=256, batch=2, seq=32)
ALL = dict(context="all", stacks="python")
#: mode -> (how it records, its options)
MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "none": ("none", {}),
    "torch": ("torch", ALL),
    "torch-alloc": ("torch", dict(context="alloc", stacks="python")),
    "torch-state": ("torch", dict(context="state", stacks="python")),
    "torch-stacks-all": ("torch", dict(context="all", stacks="all")),
    "memsight": ("memsight", ALL),
    "memsight-alloc": ("memsight", dict(context="alloc", stacks="python")),
    "memsight-state": ("memsight", dict(context="state", stacks="python")),
    "memsight-stacks-all": ("memsight", dict(context="all", stacks="all")),
    "memsight-handed": ("memsight", dict(ALL, handed=True)),
    "native": ("native", ALL),
    "native-alloc": ("native", dict(context="alloc", stacks="python")),
    "native-stacks-all": ("native", dict(context="all", stacks="all")),
    "native-nodump": ("native", dict(ALL, env={"MEMSIGHT_NATIVE_DUMP": "0"})),
    "native-noids": ("native", dict(ALL, env={"MEMSIGHT_NATIVE_STACK_IDS": "0"})),
}
QUICK = ["none", "torch", "memsight", "native"]


def import_memsight() -> Any:
    try:
        import memsight._core  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(ROOT / "python"))
    import memsight.torch as mt

    return mt


def native_recorder(mt: Any) -> Any:
    """The native recorder's entry point, once memsight.torch has one."""
    return getattr(mt, "native_record", None)


# -- the child: one mode, one process ---------------------------------------------
def build(w: dict[str, int], device: str) -> tuple[Any, Any]:
    import torch

    try:
        import transformers
    except ImportError:
        if device != "cpu":
            raise
        transformers = None
    if transformers is not None:
        config = transformers.LlamaConfig(
            vocab_size=w["vocab"], hidden_size=w["hidden"], intermediate_size=w["intermediate"],
            num_hidden_layers=w["layers"], num_attention_heads=w["heads"], num_key_value_heads=w["heads"],
            max_position_embeddings=w["seq"])
        with torch.device(device) if device != "cpu" else contextlib.nullcontext():  # no init on the host
            model = transformers.LlamaForCausalLM(config)
    else:  # the dry run without transformers: a stand-in with the same call
        model = tiny_lm(w["vocab"], w["hidden"])
    model = model.to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def tiny_lm(vocab: int, hidden: int) -> Any:
    import torch
    from types import SimpleNamespace

    class LM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.out = torch.nn.Embedding(vocab, hidden), torch.nn.Linear(hidden, vocab)

        def forward(self, input_ids: Any, labels: Any) -> Any:
            logits = self.out(torch.relu(self.emb(input_ids)))
            return SimpleNamespace(loss=torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()))

    return LM()


def recording(mode: str, model: Any, opt: Any, max_entries: int, dry: bool) -> Any:
    """A context manager that records as ``mode`` says."""
    import torch

    kind, opts = MODES[mode]
    opts = dict(opts)
    handed = opts.pop("handed", False)
    opts.pop("env", None)  # set by the parent
    if kind == "none" or (dry and kind == "torch"):  # torch cannot record without CUDA
        return contextlib.nullcontext()
    if kind == "torch":
        @contextlib.contextmanager
        def torch_recording() -> Any:
            torch.cuda.memory._record_memory_history("all", max_entries=max_entries, **opts)
            try:
                yield
            finally:
                torch.cuda.memory._record_memory_history(None)
        return torch_recording()
    mt = import_memsight()
    if kind == "native":
        return native_recorder(mt)(max_entries=max_entries, **opts)
    extra = dict(model=model, optimizer=opt) if handed else {}
    return mt.record(max_entries=max_entries, **opts, **extra)


def events(device: str) -> int:
    import torch

    if device == "cpu":
        return 0
    s = torch.cuda.memory_stats()
    return int(s.get("allocation.all.allocated", 0)) + int(s.get("allocation.all.freed", 0))


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    if args.cpus:  # every mode on the same cores: a process placed elsewhere runs its host work slower
        os.sched_setaffinity(0, parse_cpus(args.cpus))
    device = "cpu" if args.dry_run else "cuda"
    w = dict(DRY_WORKLOAD if args.dry_run else WORKLOAD)
    w.update({k: v for k, v in (("batch", args.batch), ("seq", args.seq)) if v})
    torch.manual_seed(0)
    model, opt = build(w, device)
    ids = torch.randint(0, w["vocab"], (w["batch"], w["seq"]), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else contextlib.nullcontext():
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    times, cpu = [], []
    with recording(args.mode, model, opt, args.max_entries, args.dry_run):
        for _ in range(args.warmup):
            step()
        sync()
        if MODES[args.mode][0] in ("memsight", "native") and device == "cuda":
            # The native dumper is built, checked against torch's snapshot and
            # warmed once, in the background, when recording starts: a cost
            # of the job's first seconds, not of each step (native-nodump
            # measured it: ~5 ms a step while it runs)
            from memsight.torch.capture import _native_dump

            _native_dump.wait_warm(120)
        before = events(device)
        for _ in range(args.steps):
            t, c = time.perf_counter(), time.process_time()
            step()
            cpu.append(time.process_time() - c)  # the host's work, before waiting for the GPU
            sync()
            times.append(time.perf_counter() - t)
        after = events(device)
        # What the recording holds: a mode whose recording is off holds no
        # entries, and its step time says nothing about recording's cost.
        recorded = 0
        if device == "cuda":
            recorded = sum(len(t) for t in torch.cuda.memory._snapshot()["device_traces"])
    native = {}
    if MODES[args.mode][0] == "native":
        from memsight.torch.capture import _native_record

        native = _native_record.status()["counts"]
    return {"mode": args.mode, "native_counts": native, "step_s": times, "cpu_s": cpu, "events_per_step": (after - before) / max(1, args.steps),
            "entries_recorded": recorded,
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__}


# -- the parent: rounds of fresh processes, the table ---------------------------------
def run_child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--mode", mode, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--max-entries", str(args.max_entries)] + (["--dry-run"] if args.dry_run else []) \
        + [f"--{k}={v}" for k, v in (("batch", args.batch), ("seq", args.seq), ("cpus", args.cpus)) if v]
    env = dict(os.environ, MEMSIGHT_NATIVE_RECORD="0" if MODES[mode][0] == "memsight" else "1",
               **MODES[mode][1].get("env", {}))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"no result in {args.timeout} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"mode": mode, "error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]}


def parse_cpus(text: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8}"""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def summarise(runs: dict[str, list[dict[str, Any]]], notes: dict[str, str]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for mode, results in runs.items():
        good = [r for r in results if "step_s" in r]
        errors = [r["error"] for r in results if "error" in r]
        if not good:
            rows[mode] = {"note": notes.get(mode) or "; ".join(errors) or "not run"}
            continue
        medians = [statistics.median(r["step_s"]) for r in good]
        steps = [t for r in good for t in r["step_s"]]
        rows[mode] = {"rounds": len(good), "round_median_ms": [m * 1e3 for m in medians],
                      "median_ms": statistics.median(medians) * 1e3,
                      "spread_ms": [min(medians) * 1e3, max(medians) * 1e3],
                      "p10_p90_ms": [quantile(steps, 0.1) * 1e3, quantile(steps, 0.9) * 1e3],
                      "cpu_ms": statistics.median(statistics.median(r.get("cpu_s") or [0]) for r in good) * 1e3,
                      "events_per_step": statistics.median(r["events_per_step"] for r in good),
                      "entries_recorded": statistics.median(r.get("entries_recorded", 0) for r in good),
                      "native_counts": good[-1].get("native_counts") or {},
                      "errors": errors}
    base = rows.get("none", {}).get("median_ms")
    for row in rows.values():
        if base and "median_ms" in row:
            row["overhead"] = row["median_ms"] / base - 1
            if row["events_per_step"]:
                row["us_per_event"] = (row["median_ms"] - base) * 1e3 / row["events_per_step"]
                row["cpu_us_per_event"] = (row["cpu_ms"] - rows["none"]["cpu_ms"]) * 1e3 / row["events_per_step"]
    return rows


def table(rows: dict[str, Any]) -> str:
    out = [f"{'mode':<20} {'step ms':>8} {'rounds min-max':<16} {'p10-p90':<16} {'overhead':>9} "
           f"{'events/step':>11} {'us/event':>8} {'cpu ms':>7} {'cpu us/ev':>9} {'recorded':>9}"]
    for mode, r in rows.items():
        if "median_ms" not in r:
            out.append(f"{mode:<20} skipped: {r['note']}")
            continue
        over = f"{r['overhead'] * 100:+.1f}%" if "overhead" in r else "-"
        per = f"{r['us_per_event']:.2f}" if "us_per_event" in r else "-"
        cpu_per = f"{r['cpu_us_per_event']:.2f}" if "cpu_us_per_event" in r else "-"
        spread, p10_p90 = ("{:.2f}-{:.2f}".format(*r[k]) for k in ("spread_ms", "p10_p90_ms"))
        out.append(f"{mode:<20} {r['median_ms']:8.2f} {spread:<16} {p10_p90:<16} {over:>9} "
                   f"{r['events_per_step']:11.0f} {per:>8} {r['cpu_ms']:7.2f} {cpu_per:>9} "
                   f"{r.get('entries_recorded', 0):9.0f}")
    return "\n".join(out)


def parent(args: argparse.Namespace) -> int:
    modes = args.modes.split(",") if args.modes else (QUICK if args.quick else list(MODES))
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"recording_overhead.py: unknown mode {unknown[0]!r} (modes: {', '.join(MODES)})", file=sys.stderr)
        return 2
    notes = {}
    if any(MODES[m][0] == "native" for m in modes) and native_recorder(import_memsight()) is None:
        notes.update({m: "memsight.torch has no native recorder (native_record)" for m in modes
                      if MODES[m][0] == "native"})
    runnable = [m for m in modes if m not in notes]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for r in range(args.rounds):
        k = r % len(runnable) if runnable else 0
        for mode in runnable[k:] + runnable[:k]:
            res = run_child(mode, args)
            runs[mode].append(res)
            print(f"round {r + 1}/{args.rounds} {mode}: "
                  + (f"{statistics.median(res['step_s']) * 1e3:.2f} ms" if "step_s" in res else res["error"]),
                  file=sys.stderr, flush=True)
    rows = summarise(runs, notes)
    info = next((x for v in runs.values() for x in v if "device" in x), {})
    workload = dict(DRY_WORKLOAD if args.dry_run else WORKLOAD)
    workload.update({k: v for k, v in (("batch", args.batch), ("seq", args.seq)) if v})
    result = {"workload": workload, "dry_run": args.dry_run,
              "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup, "max_entries": args.max_entries,
              "device": info.get("device"), "torch": info.get("torch"), "modes": rows}
    print(f"{result['device']}, torch {result['torch']}: {args.rounds} rounds x {args.steps} steps a mode, "
          f"each in a fresh process")
    print(table(rows))
    for mode, r in rows.items():
        if r.get("native_counts"):
            print(f"{mode}: native unwinder {r['native_counts']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0 if all("median_ms" in r or m in notes for m, r in rows.items()) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40, help="timed steps a round (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--max-entries", type=int, default=100_000)
    ap.add_argument("--modes", help="comma-separated modes (default: all; --quick: " + ",".join(QUICK) + ")")
    ap.add_argument("--quick", action="store_true", help="the quick modes, 3 rounds x 10 steps, 3 warm-up steps")
    ap.add_argument("--dry-run", action="store_true", help="a tiny model on the CPU, nothing recorded by torch")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a child may take")
    ap.add_argument("--batch", type=int, help="sequences a step (default 8): a smaller step waits less on the GPU, "
                                               "so the host's cost shows in the step time")
    ap.add_argument("--seq", type=int, help="tokens a sequence (default 1024)")
    ap.add_argument("--cpus", help="pin every child to these cores ('0-3,8'): the same cores for every mode, "
                                   "ideally the GPU's NUMA node (nvidia-smi topo -m)")
    ap.add_argument("--json")
    ap.add_argument("--mode", help=argparse.SUPPRESS)  # the child
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.warmup = 3, 10, 3
    if args.cpus:
        try:
            if not parse_cpus(args.cpus) <= os.sched_getaffinity(0):
                ap.error(f"--cpus {args.cpus}: not all of these cores are available here")
        except ValueError:
            ap.error(f"--cpus {args.cpus}: expected core numbers and ranges such as 0-3,8")
    if args.rounds < 1 or args.steps < 1 or args.warmup < 0 or args.max_entries < 1:
        ap.error("--rounds, --steps and --max-entries must be at least 1, --warmup at least 0")
    if args.mode:
        print("RESULT " + json.dumps(child(args)), flush=True)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
