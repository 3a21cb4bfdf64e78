"""Leaks found on real training loops (docs/leaks.md).

A small MLP trains with AdamW; one step runs before the allocator history
is recorded (so the optimizer state and cuBLAS's workspace exist), then 20
recorded steps, each marked by memsight.torch.mark_step() (or not marked:
the loop is then found from its repeating allocations). Then:

  - appending the loss (a tensor with its graph) to a list every step is a
    leak: reported at the line that computes the loss, at the rate torch's
    own memory_allocated() grows from step to step (on an H100 with torch
    2.11: 256 KiB a step, one block of the model's output size: more than
    the loss's own 512-byte block), in every iteration checked; `memsight
    diff --at-step` between two steps shows the same site grown by as much;
  - an evaluation loop without torch.no_grad() that keeps its losses keeps
    their whole graphs: a leak of at least the activations, with the loss's
    line as where it was allocated;
  - appending loss.item() keeps nothing on the GPU: no leak;
  - a cache that gains a tensor in each of the first 4 steps and then stays
    is not a leak.

Each snapshot's `memsight leaks` text is written to $OUT (else a temp dir).
"""

from __future__ import annotations

import inspect
import os
import pathlib

import pytest

STEPS = 20


def out_dir(tmp_path) -> pathlib.Path:
    d = pathlib.Path(os.environ.get("OUT") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def line_of(fn, marker: str) -> int:
    """The line of `fn` that holds `marker` (a comment)."""
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(src) if marker in ln)


def run_loop(body, mark: bool, tmp_path, name: str):
    """One warm-up step, then STEPS recorded steps of `body(step)`; returns
    (memsight snapshot, leaks summary of device 0)."""
    import torch

    import memsight
    import memsight.torch as mt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    state = {"model": model, "opt": opt}
    body(-1, state)
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=200_000, stacks="python")
    state["allocated"] = []  # torch's memory_allocated() at the start of each step
    try:
        for step in range(STEPS):
            if mark:
                mt.mark_step(step)
            state["allocated"].append(torch.cuda.memory_allocated())
            body(step, state)
        torch.cuda.synchronize()
        raw = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(None)
    snap = memsight.from_dict(raw)
    leaks = snap.leaks()
    (out_dir(tmp_path) / f"leaks_{name}.txt").write_text(str(leaks))
    (dev,) = [d for d in leaks.devices if d.device == torch.cuda.current_device()]
    return snap, dev, state


def train_step(step, state, keep=None):
    import torch
    import torch.nn.functional as F

    x = torch.randn(64, 1024, device="cuda")
    y = torch.randn(64, 1024, device="cuda")
    loss = F.mse_loss(state["model"](x), y)  # LOSS LINE
    loss.backward()
    state["opt"].step()
    state["opt"].zero_grad(set_to_none=True)
    if keep is not None:
        keep(step, loss)


@pytest.mark.parametrize("mark", [True, False], ids=["mark_step", "unmarked"])
def test_a_list_of_losses_is_a_leak_at_the_loss_line(tmp_path, mark):
    import memsight

    losses = []
    snap, dev, state = run_loop(lambda s, st: train_step(s, st, keep=lambda _, loss: losses.append(loss)),
                                mark, tmp_path, "losses_" + ("marked" if mark else "unmarked"))
    at = state["allocated"]
    grows = sorted(b - a for a, b in zip(at[1:], at[2:]))  # torch's growth a step, past the first
    per_step = grows[len(grows) // 2]
    assert per_step >= 512 and grows[0] == grows[-1], grows  # a steady leak, by torch's counter
    site = f"{pathlib.Path(__file__).name}:{line_of(train_step, '# LOSS LINE')}:train_step"
    # unmarked: torch's Optimizer.step annotations, where torch records them with the history,
    # else the repeating pattern of allocations
    assert dev.iterations.source in (("memsight steps",) if mark else ("optimizer steps", "repeating allocations")), \
        dev.iterations
    assert dev.iterations.count >= STEPS - 1, dev.iterations
    assert dev.verdict == "leak", str(dev)
    assert [s.site for s in dev.sites] == [site], [s.site for s in dev.sites]
    (s,) = dev.sites
    assert s.bytes_per_iteration == per_step, str(dev)
    assert s.iterations_grown == dev.measured
    assert dev.allocated_at.site == site
    if mark:  # ten steps apart, the loss line holds ten steps' more
        d = memsight.diff(snap, at_step=(5, 15))
        grown = {x.site: x.change for x in d.data.sites if x.change > 0}
        assert grown.get(site) == 10 * per_step, grown
    print(f"\nlist of losses ({'marked' if mark else 'unmarked'}): {per_step} B a step by torch's counter, "
          f"{s.bytes_per_iteration} B by memsight leaks, at {site}")


def test_eval_without_no_grad_keeps_whole_graphs(tmp_path):
    import torch.nn.functional as F

    kept = []

    def eval_step(step, state):
        import torch

        x = torch.randn(64, 1024, device="cuda")
        loss = F.mse_loss(state["model"](x), x)  # EVAL LOSS
        kept.append(loss)  # no backward, no torch.no_grad(): the graph and what it saved stay

    _, dev, _ = run_loop(eval_step, True, tmp_path, "eval_graphs")
    assert dev.verdict == "leak", str(dev)
    site = f"{pathlib.Path(__file__).name}:{line_of(eval_step, '# EVAL LOSS')}:eval_step"
    assert dev.allocated_at.site == site, dev.allocated_at
    # the hidden activations saved for backward: 64 x 2048 floats, twice (Linear, GELU)
    assert dev.bytes_per_iteration >= 2 * 64 * 2048 * 4, dev.bytes_per_iteration
    assert len(dev.sites) >= 2


def test_a_list_of_loss_items_is_not_a_leak(tmp_path):
    values = []
    _, dev, _ = run_loop(lambda s, st: train_step(s, st, keep=lambda _, loss: values.append(loss.item())),
                         True, tmp_path, "loss_items")
    assert len(values) == STEPS + 1
    assert dev.verdict == "none", str(dev)
    assert list(dev.sites) == []


def test_a_cache_that_fills_up_then_stays_is_not_a_leak(tmp_path):
    import torch

    cache = {}

    def keep(step, loss):
        if step >= 0:
            cache.setdefault(min(step, 3), torch.randn(256, 1024, device="cuda"))  # 4 entries, then full

    _, dev, _ = run_loop(lambda s, st: train_step(s, st, keep=keep), True, tmp_path, "cache_plateau")
    assert len(cache) == 4
    assert dev.verdict == "none", str(dev)
    growth = {g.site: g.live for g in dev.growth}
    cache_site = f"{pathlib.Path(__file__).name}:{line_of(keep, '# 4 entries')}:keep"
    assert growth[cache_site][-1] == 4 * 256 * 1024 * 4, growth  # it grew, then stayed
