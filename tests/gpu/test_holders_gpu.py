"""Who holds a leak (issue 33, "Who holds it"), on real loops: a snapshot
taken by memsight.torch carries memsight_holders, and `leaks` names the
Python object that keeps the leaking blocks.

A small MLP; one step before recording, then STEPS steps marked by
memsight.torch.mark_step(), then memsight.torch.snapshot() (the dump path
every memsight dump takes: tags, then holders). Cases:

  - a list kept by a forward hook (the hook appends the layer's output);
  - a dict cache keyed by step (the model's output of every step);
  - an evaluation loop without torch.no_grad() that keeps its losses: the
    activations are kept by the losses' autograd graphs, named through the
    list that holds the losses;
  - a bounded cache (the last 2 outputs): no leak, so no holder is said,
    though the snapshot names the cache's tensors.

The cost of the walk at each dump (memsight_holders' elapsed_ms) is written
to $OUT/holders_gpu.txt with each leaks text.
"""

from __future__ import annotations

import os
import pathlib

import pytest

STEPS = 12


def out_dir(tmp_path) -> pathlib.Path:
    d = pathlib.Path(os.environ.get("OUT") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def model_and_input():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1024)).cuda()
    return model, torch.randn(64, 1024, device="cuda")


def record(body, tmp_path, name: str):
    """One warm-up call of body(-1), then STEPS marked steps; returns the raw
    snapshot (with memsight_holders), the leaks text flattened to one line."""
    import torch

    import memsight
    import memsight.torch as mt

    body(-1)
    torch.cuda.synchronize()
    with mt.record(max_entries=200_000, stacks="python", holders=True):
        for step in range(STEPS):
            mt.mark_step(step)
            body(step)
        torch.cuda.synchronize()
        raw = mt.snapshot()
    text = str(memsight.from_dict(raw).leaks())
    held = raw.get("memsight_holders", {})
    with open(out_dir(tmp_path) / "holders_gpu.txt", "a") as f:
        f.write(f"== {name}: walk {held.get('elapsed_ms')} ms over {held.get('tensors')} tensors, "
                f"complete={held.get('complete')}\n{text}\n")
    return raw, " ".join(text.split())


def holder_paths(raw) -> list[str]:
    return [h["path"] for h in raw.get("memsight_holders", {}).get("holders", [])]


def test_a_list_kept_by_a_forward_hook_is_named(tmp_path):
    model, x = model_and_input()
    kept = []
    model[0].register_forward_hook(lambda m, i, o: kept.append(o))

    def body(step):
        model(x).sum().backward()
        model.zero_grad(set_to_none=True)

    raw, text = record(body, tmp_path, "forward hook")
    assert "LEAK" in text
    assert "held by the list `" in text and "kept`" in text, text
    assert any(p.endswith("kept") for p in holder_paths(raw))
    # The walk's time is in $OUT/holders_gpu.txt: over its 250 ms budget in
    # this process's large heap (1.9 s measured), so not asserted here.


def test_a_dict_cache_keyed_by_step_is_named(tmp_path):
    import torch

    model, x = model_and_input()
    cache = {}

    def body(step):
        with torch.no_grad():
            cache[step] = model(x)

    raw, text = record(body, tmp_path, "dict cache")
    assert "LEAK" in text
    assert "held by the dict `cache` (test_holders_gpu.py, in `test_a_dict_cache_keyed_by_step_is_named()`)" \
        in text, text
    assert "Who keeps it" in text and "test_holders_gpu.py:" in text


def test_an_evaluation_loop_without_no_grad_names_the_list_of_losses(tmp_path):
    model, x = model_and_input()
    losses = []

    def body(step):
        losses.append(model(x).square().mean())  # no torch.no_grad(): each loss keeps its graph

    raw, text = record(body, tmp_path, "evaluation without no_grad")
    assert "LEAK" in text
    assert "the list `losses`" in text, text
    assert "autograd graphs" in text and "torch.no_grad()" in text


def test_a_bounded_cache_is_no_leak_and_no_holder_is_said(tmp_path):
    import torch

    model, x = model_and_input()
    recent = []

    def body(step):
        with torch.no_grad():
            recent.append(model(x))
        del recent[:-2]

    raw, text = record(body, tmp_path, "bounded cache")
    assert "LEAK" not in text
    assert "held by" not in text
    assert any(p.endswith("recent") for p in holder_paths(raw))  # named, but not a leak
