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

The hooks:
  - forward pre/post hooks on every module (post with ``always_call`` where
    torch has it) push and pop the forward mark; a module run inside a
    backward (activation checkpointing) is marked ``rec``;
  - a hook on each module output that needs a gradient marks the backward
    of that module when its gradient arrives; a hook after each parameter's
    gradient is accumulated ends it (torch >= 2.1);
  - the optimizer's step pre/post hooks mark the step.
Hooks do nothing while torch.compile traces (the compiled region is marked
by the module around it) and never raise: a failure turns the marks off
with one log line, and training goes on.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from ._cuda import torch_module

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


def choose_marker(torch: Any) -> Marker:
    """Allocation metadata where torch has it, else annotations where torch
    records them with the history (torch >= 2.5), else nothing."""
    mem = torch.cuda.memory
    if hasattr(mem, "_set_memory_metadata") and hasattr(mem, "_get_memory_metadata"):
        return MetadataMarker(torch)
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


class PhaseMarks:
    """The hooks on one model (and optimizer) that mark phases; ``install``
    and ``remove`` them. See the module docs."""

    def __init__(self, model: Any, optimizer: Any = None, marker: Marker | None = None) -> None:
        self.torch = torch_module()
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
        self._in_backward: Callable[[], bool] = (lambda: task() != -1) if task else (lambda: False)

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
        accumulate = None
        skip: set[int] = set()  # modules inside a compiled module: traced, not called
        for name, module in root.named_modules():
            if id(module) in skip:
                continue
            if type(module).__name__ == "OptimizedModule":
                skip.update(id(m) for m in module.modules() if m is not module)
            pre, post = self._forward_hooks(clean_name(name), module is root)
            self.handles.append(module.register_forward_pre_hook(pre))
            self.handles.append(module.register_forward_hook(post, always_call=True) if always
                                else module.register_forward_hook(post))
        for p in root.parameters():
            register = getattr(p, "register_post_accumulate_grad_hook", None)
            if register is None or not p.requires_grad:
                continue
            if accumulate is None:
                accumulate = self._guard(lambda _p: self.marker.set("memsight:bwd"))
            self.handles.append(register(accumulate))

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
                for t in _grad_tensors(output):
                    # A tensor a submodule returned as it is (the model's
                    # output is often its last layer's) is that submodule's.
                    if getattr(t, "_memsight_marked", False):
                        continue
                    t._memsight_marked = True
                    t.register_hook(on_grad)

        return self._guard(pre), self._guard(post)

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
