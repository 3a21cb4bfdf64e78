"""Synthetic training loops for leak detection and diffs: the simulated
caching allocator of make_categories.py runs a scripted loop with a planted
leak, none, noise, or a cache that fills up and then stays, and the test
knows the truth (which line keeps what, how much per step).

How the iterations are marked is a choice of the run, as in real snapshots:
  "memsight"   memsight.torch.mark_step()'s annotations ("memsight:step:N")
  "profiler"   torch.profiler's "ProfilerStep#N" annotations
  "optimizer"  only torch's own "Optimizer.step#..." annotations
  "none"       nothing: the iterations are the repeating pattern of allocations

    from make_leaks import loop
    snap = loop(steps=30, keep_loss=True)          # a dict, as torch pickles it
"""

from __future__ import annotations

import bisect
import random
import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_categories import CALL, MiB, TRAIN, Sim  # noqa: E402

LOSS = {"name": "train_step", "filename": "/work/project/train.py", "line": 45}
OUTPUT = {"name": "forward", "filename": "/work/project/model.py", "line": 21}
CACHE = {"name": "lookup", "filename": "/work/project/cache.py", "line": 12}
NOISE = {"name": "augment", "filename": "/work/project/data.py", "line": 30}

# Site labels memsight gives these frames (the frame rule: the innermost user frame).
LOSS_SITE = "train.py:45:train_step"
OUTPUT_SITE = "model.py:21:forward"
CACHE_SITE = "cache.py:12:lookup"


def loop(steps: int = 30, marks: str = "memsight", keep_loss: bool = False, keep_output: bool = False,
         cache_steps: int = 0, noise: int = 0, layers: int = 2, first_step: int = 0) -> dict:
    """A training loop of `steps` steps over `layers` layers. Each step: an
    input, a forward (a temporary and an activation per layer; the model's
    output), the loss (512 bytes at train.py:45), the backward (a gradient per
    layer), an optimizer step (its state made at the first step), and
    zero_grad. Planted on request:
      keep_loss     the loss of every step is kept (a list of losses): 512 B a step
      keep_output   the model's output of every step is kept (1 MiB a step, made before the loss)
      cache_steps   a cache gains 1 MiB in each of the first `cache_steps` steps, then stays
      noise         a seed: a random number of data-dependent allocations of random sizes
                    per step, freed at once or kept one to three steps
    """
    sim = Sim("stacks", tags=False)
    rng = random.Random(noise) if noise else None
    for i in range(layers):
        sim.before(4 * MiB, "parameter", f"layers.{i}", f"layers.{i}.weight")
    state: list = []
    old: list = []  # what the previous step's Python names hold until rebound
    kept: list = []
    delayed: list = []  # (step it is freed in, block)
    for step in range(first_step, first_step + steps):
        sim.time += 5
        if marks in ("memsight", "profiler"):
            name = f"memsight:step:{step}" if marks == "memsight" else f"ProfilerStep#{step}"
            sim.annotations.append({"stage": "START", "name": name, "device": 0, "time_us": sim.time})
        sim.outside()
        x = sim.alloc(1 * MiB, "activation")
        for t in old:
            sim.free(t)
        old = [x]
        if rng:  # data-dependent: freed at once, or kept one to three steps
            for t in [t for t in delayed if t[0] <= step]:
                sim.free(t[1])
            delayed = [t for t in delayed if t[0] > step]
            for _ in range(rng.randint(0, 3)):
                sim.frames = [NOISE, TRAIN]
                n = sim.alloc(rng.randint(1, 4096) * 512, "temporary")
                if rng.random() < 0.5:
                    sim.free(n)
                else:
                    delayed.append((step + rng.randint(1, 3), n))
        acts = []
        for i in range(layers):
            sim.forward(f"layers.{i}")
            tmp = sim.alloc(3 * MiB, "temporary", f"layers.{i}")
            sim.free(tmp)
            acts.append(sim.alloc(2 * MiB, "activation", f"layers.{i}"))
        sim.frames = [OUTPUT, CALL, TRAIN]
        out = sim.alloc(1 * MiB, "activation")
        sim.frames = [LOSS]
        loss = sim.alloc(512, "activation")
        grads = []
        for i in reversed(range(layers)):
            sim.backward(f"layers.{i}")
            grads.append(sim.alloc(4 * MiB, "gradient", f"layers.{i}"))
            sim.free(acts[i])
        sim.optimizer(True)
        if not state:
            state = [sim.alloc(4 * MiB, "optimizer_state") for _ in range(2 * layers)]
        sim.free(sim.alloc(1 * MiB, "temporary"))
        sim.optimizer(False)
        if step - first_step < cache_steps:
            sim.frames = [CACHE, TRAIN]
            sim.alloc(1 * MiB, "unknown")
        sim.outside()
        for g in grads:  # zero_grad(set_to_none=True)
            sim.free(g)
        (kept if keep_output else old).append(out)
        (kept if keep_loss else old).append(loss)
    snap = sim.snapshot()
    if marks == "none":
        snap["external_annotations"] = []
    return snap


def one_process_two_devices(steps: int = 30, marks: str = "optimizer", leak_on: int = 1) -> dict:
    """One process driving two GPUs (a model split across cuda:0 and cuda:1):
    the same loop runs on both devices on one clock (each step's part of
    device 1's trace retimed into the same step's span of device 0), and, as
    torch records an annotation on the device
    current when it runs, every step mark and optimizer step lands on device
    0 only, though each optimizer step allocates on both. Device `leak_on`
    keeps the model's output of every step (1 MiB, made in the forward)."""
    snaps = [loop(steps=steps, marks=marks, keep_output=(d == leak_on)) for d in (0, 1)]
    shift = 1 << 44
    second = snaps[1]
    # Both loops annotate the same points (step marks, optimizer START/END):
    # device 1's times are mapped, span by span, onto device 0's.
    ours = [a["time_us"] for a in snaps[0]["external_annotations"]]
    theirs = [a["time_us"] for a in second["external_annotations"]]
    for e in second["device_traces"][0]:
        e["addr"] += shift
        t = e["time_us"]
        j = bisect.bisect_right(theirs, t) - 1
        if j < 0 or j + 1 >= len(theirs):
            k = max(j, 0)
            e["time_us"] = t - theirs[k] + ours[k]
        else:
            span = (t - theirs[j]) / (theirs[j + 1] - theirs[j])
            e["time_us"] = ours[j] + int(span * (ours[j + 1] - ours[j]))
    for seg in second["segments"]:
        seg["device"] = 1
        seg["address"] += shift
        for b in seg["blocks"]:
            b["address"] += shift
    snap = snaps[0]
    snap["segments"] = snap["segments"] + second["segments"]
    snap["device_traces"] = [snap["device_traces"][0], second["device_traces"][0]]
    snap["external_annotations"] = [a for a in snap["external_annotations"] if a["device"] == 0]
    return snap
