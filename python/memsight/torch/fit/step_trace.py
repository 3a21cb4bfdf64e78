"""A training step run under fake tensors, written as a requests-only
torch memory snapshot (see fake_trace.py and docs/estimate.md)."""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
from collections.abc import Callable
from typing import Any

from ..capture.phase_marks import Marker, PhaseMarks
from ..capture.tags import storage_tags
from .fake_trace import FakeTrace, dispatch_mode
from .terms import Terms

log = logging.getLogger("memsight")


class TraceMarker(Marker):
    """Phase marks stamped on the fake trace's entries, as torch stamps its
    per-thread allocation metadata (``user_metadata``)."""

    kind = "metadata"

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self) -> str:
        return getattr(self._local, "mark", "")

    def set(self, mark: str) -> None:
        self._local.mark = mark


@contextlib.contextmanager
def _optimizers_see_fake_tensors() -> Any:
    """torch's optimizers take their multi-tensor (foreach) path by default
    only for plain tensors on a GPU; fake tensors stand for those, so the
    optimizer takes the path (and makes the temporaries) of the real run."""
    try:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch.optim import optimizer as o

        types = getattr(o, "_foreach_supported_types")  # noqa: B009 - private in torch
    except (ImportError, AttributeError):
        yield
        return
    added = FakeTensor not in types
    if added:
        types.append(FakeTensor)
    try:
        yield
    finally:
        if added:
            types.remove(FakeTensor)


def _fake_mode() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def _on_device(value: Any, device: str) -> Any:
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)


def _move(module: Any, device: str) -> None:
    """Moves parameters and buffers to the fake device in the order
    ``Module.to`` does (children first, then a module's own), keeping tied
    parameters tied. ``Module.to`` itself cannot: it swaps a fake parameter
    into the old one, which the fake mode's weak references forbid."""
    import torch

    done: dict[int, Any] = {}

    def visit(m: Any) -> None:
        for child in m.children():
            visit(child)
        for k, p in list(m._parameters.items()):
            if p is None or p.device == torch.device(device):
                continue
            if id(p) not in done:
                done[id(p)] = torch.nn.Parameter(p.detach().to(device), requires_grad=p.requires_grad)
            m._parameters[k] = done[id(p)]
        for k, b in list(m._buffers.items()):
            if b is not None and b.device != torch.device(device):
                if id(b) not in done:
                    done[id(b)] = b.to(device)
                m._buffers[k] = done[id(b)]

    visit(module)


def _build_model(model: Any, device: str) -> Any:
    """The model on the fake device: built by a factory, or a copy of a
    module (cloned under fake tensors: no data is copied)."""
    import torch

    m = model() if callable(model) and not isinstance(model, torch.nn.Module) else copy.deepcopy(model)
    if not isinstance(m, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module or a function returning one, not {type(m).__name__}")
    _move(m, device)
    return m


def trace_step(step: Callable[..., Any], model: Any, optimizer: Callable[..., Any] | None = None,
               inputs: Any = None, steps: int = 2, device: str = "cuda:0", stacks: bool = True,
               marks: bool = True, terms: Any = True) -> dict[str, Any]:
    """Runs ``step(model, optimizer, inputs)`` ``steps`` times under fake
    tensors on ``device`` and returns the requests-only snapshot (a dict).

    ``model``: a ``torch.nn.Module`` (copied under fake tensors, never
    touched) or a function that builds one; ``optimizer``: a function of
    the fake model's parameters (``lambda params: torch.optim.AdamW(params)``)
    or None; ``inputs``: the step's inputs (tensors anywhere in lists, tuples
    and dicts; copied to the fake device) or a function returning them.
    ``terms``: what fake tensors cannot see, applied as the step runs
    (True: terms.Terms() with its measured sizes; False: none)."""
    import torch

    if terms is True:
        terms = Terms()
    if steps < 1:
        raise ValueError(f"steps must be at least 1, not {steps}")
    trace = FakeTrace(stacks=stacks)
    marker = TraceMarker()
    trace.mark = marker.get
    if terms:
        terms.attach(trace)
    fake = _fake_mode()
    rec = dispatch_mode(trace)
    with fake, rec, _optimizers_see_fake_tensors():
        m = _build_model(model, device)
        opt = optimizer(m.parameters()) if optimizer is not None else None
        phases = PhaseMarks(m, opt, marker=marker).install() if marks else None
        try:
            for i in range(steps):
                trace.annotate(f"memsight:step:{i}")
                batch = inputs(i) if callable(inputs) else inputs
                batch = _on_device(batch, device)
                step(m, opt, batch)
                del batch
            if terms:
                terms.finish(trace)
            tags = storage_tags(m, opt, storage_of=lambda st: trace.address_of(st))
            traces = [list(t) for t in trace.snapshot_traces()]
        finally:
            if phases is not None:
                phases.remove()
    applied = terms.applied if terms else {}
    estimate = {"version": 1, "produced_by": "memsight.torch.estimate: the step under torch's fake tensors",
                "torch": str(torch.__version__), "steps": steps,
                "terms": [{"name": k, "bytes": v} for k, v in applied.items()],
                "notes": ["library workspaces that live for one kernel (cuDNN attention and convolution "
                          "plans, memory-efficient attention) are not included"]}
    return {"segments": [], "device_traces": traces, "external_annotations": list(trace.annotations),
            "memsight_tags": {"version": 1, "time_us": trace.tick(), "storages": tags},
            "memsight_estimate": estimate}
