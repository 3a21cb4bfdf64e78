"""Line profiler overhead on a real training step, on a GPU machine.

Three ways, in the same run, alternating so all see the same machine load:

* plain: the step unprofiled;
* memsight: ``memsight.torch.LineProfiler`` on the step and the model's
  forward methods (its native hook reading c10's counters natively);
* memsight-dict: the same hook reading ``torch._C._cuda_memoryStats()`` (a
  dict per line), as before the native reader (``MEMSIGHT_NATIVE_COUNTERS=0``);
* baseline: a pure-Python ``sys.settrace`` profiler that, like
  pytorch_memlab's, traces every frame and calls ``torch.cuda.memory_stats()``
  (then resets the peak and accumulated counters) on every line and return of
  the same profiled functions.

It prints the median step times, memsight's step time over plain (target
<= 1.5x) and the baseline's overhead over memsight's (target >= 5x). Then,
on a function of many cheap lines, the cost of one sample each way.

    python3 bench/bench_line_profiler.py [--steps 30] [--rounds 5] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

try:
    import memsight._linehook  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from memsight.torch import LineProfiler  # noqa: E402


class Block(torch.nn.Module):
    """A transformer block written out line by line, so its lines can be profiled."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        h = self.norm1(x)
        q, k, v = self.qkv(h).split(c, dim=-1)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        x = x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))
        return x


class Model(torch.nn.Module):
    def __init__(self, vocab: int = 8192, width: int = 512, depth: int = 6, heads: int = 8) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def train_step(model: Model, opt: torch.optim.Optimizer, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


class SettraceBaseline:
    """The pure-Python reference: settrace on every frame, memory_stats() on every profiled line."""

    def __init__(self, *functions) -> None:
        self.codes = {getattr(f, "__func__", f).__code__ for f in functions}
        self.records: list[dict] = []
        self.prev: dict = {}

    def _trace(self, frame, event, arg):
        if event == "call":
            return self._trace
        code = frame.f_code
        if event in ("line", "return") and code in self.codes:
            self.records.append({"line": self.prev.get(code, code.co_firstlineno), **torch.cuda.memory_stats()})
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.reset_accumulated_memory_stats()
            self.prev[code] = frame.f_lineno if event == "line" else code.co_firstlineno
        return self._trace

    def __enter__(self):
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)


def timed_steps(model, opt, tokens, steps: int, ctx_factory) -> float:
    """Median seconds per step of `steps` steps under the context from ctx_factory()."""
    times = []
    with ctx_factory():
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            train_step(model, opt, tokens)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class _DictCounters:
    """LineProfiler with the native reader switched off (the dict per line)."""

    def __init__(self, *functions) -> None:
        self.prof = LineProfiler(*functions)

    def __enter__(self):
        old = os.environ.get("MEMSIGHT_NATIVE_COUNTERS")
        os.environ["MEMSIGHT_NATIVE_COUNTERS"] = "0"
        try:
            self.prof.__enter__()
        finally:
            if old is None:
                del os.environ["MEMSIGHT_NATIVE_COUNTERS"]
            else:
                os.environ["MEMSIGHT_NATIVE_COUNTERS"] = old
        assert not self.prof.hook.native
        return self

    def __exit__(self, *exc):
        self.prof.__exit__(*exc)


def many_lines(n: int) -> int:
    x = 0
    for i in range(n):
        x += i
    return x


def per_sample_ns(ctx_factory, n: int, rounds: int) -> float:
    """Median nanoseconds per line of many_lines(n) under the context."""
    times = []
    for _ in range(rounds):
        with ctx_factory():
            t0 = time.perf_counter_ns()
            many_lines(n)
            times.append((time.perf_counter_ns() - t0) / (2 * n))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("this benchmark needs a CUDA GPU")
    torch.manual_seed(0)
    model = Model().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 8192, (args.batch, args.seq + 1), device="cuda")
    profiled = (train_step, Model.forward, Block.forward)
    for _ in range(5):  # warm-up: kernels, allocator cache
        train_step(model, opt, tokens)
    memsight_prof = None

    def with_memsight():
        nonlocal memsight_prof
        memsight_prof = LineProfiler(*profiled)
        return memsight_prof

    ways = {"plain": _Nothing, "memsight": with_memsight, "memsight-dict": lambda: _DictCounters(*profiled),
            "baseline": lambda: SettraceBaseline(*profiled)}
    results: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.rounds):
        for name, factory in ways.items():
            results[name].append(timed_steps(model, opt, tokens, args.steps, factory))
    med = {k: statistics.median(v) for k, v in results.items()}
    over_ms = med["memsight"] - med["plain"]
    over_base = med["baseline"] - med["plain"]
    out = {
        "python": sys.version.split()[0], "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "backend": memsight_prof.backend if memsight_prof else None,
        "samples_per_step": (memsight_prof.hook.samples / (args.steps)) if memsight_prof else None,
        "step_ms": {k: round(v * 1e3, 3) for k, v in med.items()},
        "memsight_over_plain": round(med["memsight"] / med["plain"], 3),
        "baseline_over_plain": round(med["baseline"] / med["plain"], 3),
        "overhead_ratio_baseline_to_memsight": round(over_base / over_ms, 1) if over_ms > 0 else None,
        "counter_source": memsight_prof.counter_source if memsight_prof else None,
    }
    n = 20000
    micro = {"plain": per_sample_ns(_Nothing, n, args.rounds),
             "memsight": per_sample_ns(lambda: LineProfiler(many_lines), n, args.rounds),
             "memsight-dict": per_sample_ns(lambda: _DictCounters(many_lines), n, args.rounds),
             "baseline": per_sample_ns(lambda: SettraceBaseline(many_lines), n, args.rounds)}
    out["ns_per_line"] = {k: round(v, 1) for k, v in micro.items()}
    cost = {k: v - micro["plain"] for k, v in micro.items() if k != "plain"}
    out["sample_cost_ns"] = {k: round(v, 1) for k, v in cost.items()}
    out["dict_over_native_sample_cost"] = round(cost["memsight-dict"] / cost["memsight"], 1)
    print(f"Python {out['python']}, torch {out['torch']}, {out['gpu']}, memsight backend {out['backend']}")
    print(f"samples per step: {out['samples_per_step']}")
    for k, v in out["step_ms"].items():
        print(f"  {k:9s} {v:9.3f} ms/step")
    print(f"memsight / plain: {out['memsight_over_plain']}x (target <= 1.5x)")
    print(f"baseline / plain: {out['baseline_over_plain']}x")
    print(f"overhead, baseline over memsight: {out['overhead_ratio_baseline_to_memsight']}x (target >= 5x)")
    print(f"counters read from: {out['counter_source']}")
    print(f"one profiled line of many_lines(): {out['ns_per_line']} ns")
    print(f"  cost of a sample: {out['sample_cost_ns']} ns; the dict's over the native reader's: "
          f"{out['dict_over_native_sample_cost']}x")
    if memsight_prof is not None and memsight_prof.hook.error:
        print(f"memsight hook error: {memsight_prof.hook.error}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
