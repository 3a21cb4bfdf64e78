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
from .attention import fused_attention_mode
from .fake_cuda import current_stream_id, fake_cuda, gpu_visible
from .fake_dist import fake_ranks, fsdp_storage_hooks, run_collective
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


def _on_device(value: Any, device: str, fake: Any) -> Any:
    """The inputs on the fake device. A real tensor becomes a fake one first:
    moved as it is, the fake mode would copy it to the real device (a GPU's
    memory touched, or an error where torch has no CUDA)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._pytree import tree_map

    def move(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if not isinstance(t, FakeTensor):
            t = fake.from_tensor(t)
        return t.to(device)

    return tree_map(move, value)


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


def _takes_an_argument(f: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


def _build_model(model: Any, device: str, mesh: Any = None) -> Any:
    """The model on the fake device: built by a factory (in a distributed
    estimate on the device itself, given the job's device mesh when it takes
    an argument), or a copy of a module (cloned under fake tensors: no data
    is copied)."""
    import torch

    if callable(model) and not isinstance(model, torch.nn.Module) and mesh is not None:
        # A sharded model is built on the device, as fully_shard expects it
        # (FSDP2 shards the parameters where they are).
        with torch.device(device):
            m = model(mesh) if _takes_an_argument(model) else model()
    elif callable(model) and not isinstance(model, torch.nn.Module):
        m = model()
    else:
        m = copy.deepcopy(model)
    if not isinstance(m, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module or a function returning one, not {type(m).__name__}")
    _move(m, device)
    return m


def trace_step(step: Callable[..., Any], model: Any, optimizer: Callable[..., Any] | None = None,
               inputs: Any = None, steps: int = 2, device: str = "cuda:0", stacks: bool = True,
               marks: bool = True, terms: Any = True, world_size: int | None = None,
               rank: int = 0) -> dict[str, Any]:
    """Runs ``step(model, optimizer, inputs)`` ``steps`` times under fake
    tensors on ``device`` and returns the requests-only snapshot (a dict).

    ``model``: a ``torch.nn.Module`` (copied under fake tensors, never
    touched) or a function that builds one; ``optimizer``: a function of
    the fake model's parameters (``lambda params: torch.optim.AdamW(params)``)
    or None; ``inputs``: the step's inputs (tensors anywhere in lists, tuples
    and dicts; copied to the fake device) or a function returning them.
    ``terms``: what fake tensors cannot see, applied as the step runs
    (True: terms.Terms() with its measured sizes; False: none).
    ``world_size``: the step is one rank (``rank``) of a job of that many,
    under torch's fake process group (fake_dist.py); a model factory that
    takes an argument gets the job's device mesh (for ``fully_shard``).

    CUDA streams, events and devices are answered without a GPU while the
    step runs (fake_cuda.py), and each request is recorded on its stream."""
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
    trace.stream = current_stream_id
    with contextlib.ExitStack() as outer:
        outer.enter_context(fake_cuda(int(device.split(":")[1]) if ":" in device else 0))
        mesh = outer.enter_context(fake_ranks(world_size, rank))
        trace.collective = run_collective if mesh is not None else None
        outer.enter_context(fsdp_storage_hooks(trace))
        traces, tags = _run(trace, marker, terms, step, model, optimizer, inputs, steps, device, marks, mesh)
    applied = terms.applied if terms else {}
    produced = "memsight.torch.estimate: the step under torch's fake tensors"
    if world_size is not None:
        produced += f", rank {rank} of {world_size} (fake process group)"
    notes = terms.notes() if terms else []
    estimate: dict[str, Any] = {"version": 1, "produced_by": produced, "torch": str(torch.__version__),
                                "steps": steps, "terms": [{"name": k, "bytes": v} for k, v in applied.items()],
                                "notes": notes}
    if world_size is not None:
        estimate["world_size"], estimate["rank"] = world_size, rank
    return {"segments": [], "device_traces": traces, "external_annotations": list(trace.annotations),
            "memsight_tags": {"version": 1, "time_us": trace.tick(), "storages": tags},
            "memsight_estimate": estimate}


def _no_device_error(e: Exception) -> Exception:
    from ..._errors import MemsightError

    return MemsightError(
        "this torch is built with CUDA but sees no GPU, and its autograd cannot run a backward on fake CUDA "
        f"tensors then ({e}); estimate where a GPU is visible (it is not used), or with a CPU-only torch")


def _run(trace: FakeTrace, marker: TraceMarker, terms: Any, step: Callable[..., Any], model: Any,
         optimizer: Callable[..., Any] | None, inputs: Any, steps: int, device: str, marks: bool,
         mesh: Any) -> tuple[list[list[dict[str, Any]]], Any]:
    import torch

    fake = _fake_mode()
    rec = dispatch_mode(trace)
    # Without a GPU to ask, attention would fall back to the math kernel.
    attention = contextlib.nullcontext() if gpu_visible(torch) else fused_attention_mode()
    with fake, rec, _optimizers_see_fake_tensors(), attention:
        m = _build_model(model, device, mesh)
        opt = optimizer(m.parameters()) if optimizer is not None else None
        phases = PhaseMarks(m, opt, marker=marker).install() if marks else None
        try:
            for i in range(steps):
                trace.annotate(f"memsight:step:{i}")
                batch = inputs(i) if callable(inputs) else inputs
                batch = _on_device(batch, device, fake)
                try:
                    step(m, opt, batch)
                except RuntimeError as e:
                    if "hasPrimaryContext" in str(e):
                        raise _no_device_error(e) from e
                    raise
                del batch
            if terms:
                terms.finish(trace)
            tags = storage_tags(m, opt, storage_of=lambda st: trace.address_of(st))
            traces = [list(t) for t in trace.snapshot_traces()]
        finally:
            if phases is not None:
                phases.remove()
    return traces, tags
