"""Phase marks: while a model runs, which module and which phase (forward,
backward, a forward re-run by activation checkpointing, the optimizer step)
every allocation is made in, written into torch's own allocator history so
that memsight's classifier reads it back from the snapshot.

Where torch has per-thread allocation metadata (``_set_memory_metadata``,
torch >= 2.10), each trace entry carries the mark in its ``user_metadata``:
``memsight:fwd:encoder.layers.3``, ``memsight:bwd:encoder.layers.3``,
``memsight:rec:encoder.layers.3``, ``memsight:opt``, ``memsight:bwd`` (a
backward step of no module). Older torch records ``record_function``
annotations with the allocator history instead: each mark is one START/END
pair with the same name, matched to trace entries by time (approximate).

Steps: ``mark_step()`` marks where each training step (an iteration of the
loop) begins, as a ``record_function`` annotation ``memsight:step:N``: torch
records it with the history (torch >= 2.5, whichever of the two above the
phase marks use), and ``memsight leaks`` and ``diff --at-step`` read the
iterations from it. A step is a moment, not a state of later entries: an
annotation keeps its time even when no allocation follows it before the
next phase mark, which ``user_metadata`` would not.

The hooks, on the model's blocks by default (``detail="blocks"``: the
model, its children, and the items of every ModuleList, ModuleDict or
Sequential among them: a transformer's layers, a ResNet's bottlenecks), or
on every module (``detail="modules"``: finer names, several times the cost,
since every hook runs at every step; bench/README.md):
  - forward pre/post hooks (post with ``always_call`` where torch has it)
    push and pop the forward mark; a module run inside a backward
    (activation checkpointing) is marked ``rec``;
  - a hook on each marked module's output that needs a gradient marks the
    backward of that module when its gradient arrives; the first of them in
    a backward asks autograd to call back when the backward ends, which
    ends the marks (``memsight:bwd`` for what autograd does last);
  - the optimizer's step pre/post hooks mark the step.
Hooks do nothing while torch.compile traces (the compiled region is marked
by the module around it) and never raise: a failure turns the marks off
with one log line, and training goes on.
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from .._util.cuda import torch_module

log = logging.getLogger("memsight")

# Wrapper components that are not the user's module names.
_WRAPPERS = frozenset({"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})


def clean_name(name: str) -> str:
    """``_orig_mod.layers.0._checkpoint_wrapped_module.attn`` -> ``layers.0.attn``."""
    if not any(w in name for w in _WRAPPERS):
        return name
    return ".".join(p for p in name.split(".") if p not in _WRAPPERS)


def unwrap(model: Any) -> Any:
    """The model inside DistributedDataParallel / DataParallel."""
    if type(model).__name__ in ("DistributedDataParallel", "DataParallel") and hasattr(model, "module"):
        return model.module
    return model


class Marker:
    """Sets the current mark of this thread; ``get`` returns what was set."""

    kind = "none"

    def get(self) -> str:
        return ""

    def set(self, mark: str) -> None:
        pass


_LISTS = ("ModuleList", "ModuleDict")  # never called: their items belong to the module above


def kind_of(module: Any) -> str:
    return type(module).__name__


def marked_modules(root: Any, detail: str = "blocks") -> list[tuple[str, Any]]:
    """(name, module) of the modules that get marks: every module, or the
    blocks: the model, its children, the items of a ModuleList or
    ModuleDict held by a marked module, and the items of a marked
    Sequential. Modules inside a compiled module are traced, not called,
    and get none."""
    if detail not in ("blocks", "modules"):
        raise ValueError(f"detail must be 'blocks' or 'modules', not {detail!r}")
    out: list[tuple[str, Any]] = []
    marked: set[int] = set()
    skip: set[int] = set()
    parent_of: dict[int, Any] = {}
    for name, module in root.named_modules():
        for child in module.children():
            parent_of.setdefault(id(child), module)
        if id(module) in skip:
            continue
        if type(module).__name__ == "OptimizedModule":
            skip.update(id(m) for m in module.modules() if m is not module)
        parent = parent_of.get(id(module))
        owner = parent  # the first module above that is called
        while owner is not None and kind_of(owner) in _LISTS:
            owner = parent_of.get(id(owner))
        kind = kind_of(parent)
        if kind_of(module) in _LISTS:
            continue
        if (detail == "modules" or module is root or parent is root
                or (kind in _LISTS and id(owner) in marked)
                or (kind == "Sequential" and id(parent) in marked)):
            marked.add(id(module))
            out.append((name, module))
    return out


class MetadataMarker(Marker):
    """torch's per-thread allocation metadata (stamped on every trace entry)."""

    kind = "metadata"

    def __init__(self, torch: Any) -> None:
        self._set = torch.cuda.memory._set_memory_metadata
        self._get = torch.cuda.memory._get_memory_metadata

    def get(self) -> str:
        return self._get()

    def set(self, mark: str) -> None:
        self._set(mark)


class AnnotationMarker(Marker):
    """A record_function START/END pair per mark (external annotations);
    the current mark is kept here, per thread."""

    kind = "annotations"

    def __init__(self, torch: Any) -> None:
        self._rf = torch.autograd.profiler.record_function
        self._local = threading.local()

    def get(self) -> str:
        return getattr(self._local, "mark", "")

    def set(self, mark: str) -> None:
        self._local.mark = mark
        with self._rf(mark or "memsight:none"):
            pass


def _in_graph_task(task: Callable[[], int]) -> Callable[[], bool]:
    """True inside an autograd graph task (a backward), from torch's task id."""
    return lambda: task() != -1


def choose_marker(torch: Any) -> Marker:
    """Allocation metadata where torch has it, else annotations where torch
    records them with the history (torch >= 2.5), else nothing."""
    mem = torch.cuda.memory
    if hasattr(mem, "_set_memory_metadata") and hasattr(mem, "_get_memory_metadata"):
        return MetadataMarker(torch)
    params: Mapping[str, Any]
    try:
        params = inspect.signature(mem._record_memory_history).parameters
    except (AttributeError, TypeError, ValueError):
        params = {}
    if "global_record_annotations" in params:
        try:
            return AnnotationMarker(torch)
        except AttributeError:  # no record_function (a stand-in torch)
            pass
    return Marker()


_step_lock = threading.Lock()
_next_step = 0
_step_failed = False


def mark_step(step: int | None = None) -> int:
    """Marks the start of a training step in torch's allocation history, for
    ``memsight leaks`` (which step leaves memory behind) and ``memsight diff
    --at-step N``. Call it once per iteration, before the step's work::

        for batch in loader:
            memsight.torch.mark_step()
            train_step(batch)

    ``step``: the step's number (default: one more than the last, from 0).
    Returns the number used. Costs one ``record_function`` enter and exit;
    recorded only while torch records the allocator history (torch >= 2.5).
    Never raises: a failure is logged once and the loop goes on.
    """
    global _next_step, _step_failed
    with _step_lock:
        n = _next_step if step is None else int(step)
        _next_step = n + 1
    if _step_failed:
        return n
    try:
        torch = torch_module()
        rf = getattr(getattr(getattr(torch, "autograd", None), "profiler", None), "record_function", None)
        if rf is None:  # a torch without the profiler's record_function: nothing to mark with
            return n
        with rf(f"memsight:step:{n}"):
            pass
    except Exception:
        _step_failed = True
        log.warning("memsight: mark_step() could not record the step; steps are not marked, training goes on",
                    exc_info=True)
    return n


class PhaseMarks:
    """The hooks on one model (and optimizer) that mark phases; ``install``
    and ``remove`` them. See the module docs."""

    def __init__(self, model: Any, optimizer: Any = None, marker: Marker | None = None,
                 detail: str = "blocks") -> None:
        self.torch = torch_module()
        self.detail = detail
        self._queued = False  # an end-of-backward callback is waiting
        self._hooked: dict[int, Any] = {}  # id -> weak reference of the outputs hooked
        self.model = unwrap(model) if model is not None else None
        self.optimizer = optimizer
        self.marker = marker if marker is not None else choose_marker(self.torch)
        self.handles: list[Any] = []
        self.failed = False
        self._local = threading.local()  # per thread: the marks to restore (a stack)
        compiler = getattr(self.torch, "compiler", None)
        self._compiling: Callable[[], bool] = (
            getattr(compiler, "is_compiling", None)
            or getattr(getattr(self.torch, "_dynamo", None), "is_compiling", None)
            or (lambda: False)
        )
        task = getattr(self.torch._C, "_current_graph_task_id", None)
        self._in_backward: Callable[[], bool] = _in_graph_task(task) if task else (lambda: False)

    # -- install / remove --------------------------------------------------------------
    def install(self) -> PhaseMarks:
        if self.handles or self.marker.kind == "none":
            return self
        try:
            if self.model is not None:
                self._hook_modules()
            if self.optimizer is not None:
                self._hook_optimizer()
        except Exception:
            log.exception("memsight: could not install the phase marks; memory kinds will be inferred")
            self.remove()
        return self

    def remove(self) -> None:
        handles, self.handles = self.handles, []
        for h in handles:
            try:
                h.remove()
            except Exception:
                pass

    def _hook_modules(self) -> None:
        root = self.model
        always = "always_call" in inspect.signature(root.register_forward_hook).parameters
        for name, module in marked_modules(root, self.detail):
            pre, post = self._forward_hooks(clean_name(name), module is root)
            self.handles.append(module.register_forward_pre_hook(pre))
            self.handles.append(module.register_forward_hook(post, always_call=True) if always
                                else module.register_forward_hook(post))

    def _hook_optimizer(self) -> None:
        opt = self.optimizer
        pre_reg = getattr(opt, "register_step_pre_hook", None)
        post_reg = getattr(opt, "register_step_post_hook", None)
        if pre_reg is None or post_reg is None:
            log.info("memsight: this torch has no optimizer step hooks; the step is inferred from its stacks")
            return

        def pre(_opt: Any, _args: Any, _kwargs: Any) -> None:
            self._push("memsight:opt", reset=False)

        def post(_opt: Any, _args: Any, _kwargs: Any) -> None:
            self._pop()

        self.handles.append(pre_reg(self._guard(pre)))
        self.handles.append(post_reg(self._guard(post)))

    # -- the marks -----------------------------------------------------------------------
    def _stack(self) -> list[str]:
        s = getattr(self._local, "stack", None)
        if s is None:
            s = self._local.stack = []
        return s

    def _push(self, mark: str, reset: bool) -> None:
        stack = self._stack()
        prev = self.marker.get()
        if reset:
            # The model's own forward starts afresh: a stack left by an
            # exception is dropped, and no mark of ours outlives it (a forward
            # inside optimizer.step(closure) is not part of the step; on the
            # CPU, the backward's last mark stays on this thread).
            self._queued = False
            self._hooked.clear()
            if stack:
                prev = stack[0]
                stack.clear()
            if prev.startswith("memsight:"):
                prev = ""
        stack.append(prev)
        self.marker.set(mark)

    def _pop(self) -> None:
        stack = self._stack()
        self.marker.set(stack.pop() if stack else "")

    def _forward_hooks(self, name: str, is_root: bool) -> tuple[Callable[..., Any], Callable[..., Any]]:
        fwd, rec, bwd = f"memsight:fwd:{name}", f"memsight:rec:{name}", f"memsight:bwd:{name}"
        compiling, in_backward = self._compiling, self._in_backward

        def on_grad(_grad: Any) -> None:
            self.marker.set(bwd)
            self._end_with_backward()

        on_grad = self._guard(on_grad)

        def pre(_module: Any, _args: Any) -> None:
            if compiling():
                return
            self._push(rec if in_backward() else fwd, reset=is_root)

        def post(_module: Any, _args: Any, output: Any) -> None:
            if compiling():
                return
            self._pop()
            if not in_backward() and self.torch.is_grad_enabled():
                seen = self._hooked
                if len(seen) > 4096:  # submodules run without the model: forget old outputs
                    seen.clear()
                for t in _grad_tensors(output):
                    # A tensor a submodule returned as it is (the model's
                    # output is often its last layer's) is that submodule's.
                    ref = seen.get(id(t))
                    if ref is not None and ref() is t:
                        continue
                    seen[id(t)] = weakref.ref(t)
                    # On the autograd node (C++, torch >= 2) rather than the
                    # tensor (Python bookkeeping per hook): a few µs a module.
                    prehook = getattr(t.grad_fn, "register_prehook", None)
                    (prehook if prehook is not None else t.register_hook)(on_grad)

        return self._guard(pre), self._guard(post)

    def _end_with_backward(self) -> None:
        """Once per backward: when autograd finishes it, the last module's
        mark gives way to ``memsight:bwd`` (gradients accumulated, hooks of
        others) instead of lasting until the next step. Autograd may call
        back on another thread than the hooks', so the flag is not per thread;
        the model's next forward clears it, should a backward fail."""
        if self._queued:
            return
        queue = getattr(getattr(self.torch.autograd.Variable, "_execution_engine", None), "queue_callback", None)
        if queue is None:
            return
        self._queued = True

        def done() -> None:
            self._queued = False
            self.marker.set("memsight:bwd")

        queue(self._guard(done))

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """A hook that logs its first failure, turns the marks off, and never raises."""

        def hook(*args: Any) -> None:
            if self.failed:
                return None
            try:
                fn(*args)
            except Exception:
                self.failed = True
                log.exception("memsight: a phase-mark hook failed; marks are off, training goes on")
                try:
                    stack = self._stack()
                    self.marker.set(stack[0] if stack else "")
                    stack.clear()
                except Exception:
                    pass
            return None

        return hook


def _grad_tensors(output: Any, limit: int = 4) -> list[Any]:
    """The first few tensors of a module's output that need a gradient."""
    out: list[Any] = []
    todo = [output]
    while todo and len(out) < limit:
        x = todo.pop()
        if getattr(x, "requires_grad", False) and hasattr(x, "register_hook") and x.grad_fn is not None:
            out.append(x)
        elif isinstance(x, (list, tuple)):
            todo.extend(reversed(x))
        elif isinstance(x, dict):
            todo.extend(reversed(list(x.values())))
    return out
