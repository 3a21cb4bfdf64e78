"""What MemProfiler measures inside a collected call: host memory, forward
memory deltas per module, and bytes saved for backward per module.

Module hooks stay registered from the first call until every retained
function is done, but do nothing outside collected calls (one attribute
check). Saved-tensor hooks are installed only around collected calls.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger("memsight")

OUTSIDE_MODULES = "(outside modules)"

try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    _PAGE = 4096


_process: Any = None  # psutil.Process of this process, once looked up (False: no psutil)


def host_memory() -> tuple[int, int]:
    """This process's resident and virtual memory in bytes (RSS, VMS)."""
    global _process
    if _process is None:
        try:
            import psutil  # type: ignore[import-untyped]

            _process = psutil.Process()
        except ImportError:
            _process = False
    if _process is not False and _process.pid == os.getpid():
        try:
            info = _process.memory_info()
            return int(info.rss), int(info.vms)
        except Exception:
            pass
    try:
        with open("/proc/self/statm", "rb") as f:
            vms_pages, rss_pages = f.read().split()[:2]
        return int(rss_pages) * _PAGE, int(vms_pages) * _PAGE
    except (OSError, ValueError):
        return 0, 0


def _cuda_allocated(torch: Any) -> int:
    try:
        return int(torch.cuda.memory_allocated()) if torch.cuda.is_initialized() else 0
    except Exception:
        return 0


def _storage(t: Any) -> tuple[tuple[str, int], int]:
    """The identity of a tensor's storage and its size in bytes."""
    try:
        storage = t.untyped_storage()
    except AttributeError:  # torch < 2.0
        storage = t.storage()
    return (str(t.device), int(storage.data_ptr())), int(storage.nbytes())


class CallHooks:
    """Module and saved-tensor hooks feeding the tables of the current call."""

    def __init__(
        self,
        extra_pre: list[Callable[..., Any]],
        extra_post: list[Callable[..., Any]],
        user_pack: Callable[[Any], Any] | None,
        user_unpack: Callable[[Any], Any] | None,
    ) -> None:
        self.active = False  # True only inside a collected call
        self.modules: dict[str, dict[str, int]] = {}
        self.saved: dict[str, dict[str, int]] = {}
        self._seen: set[tuple[str, int]] = set()
        self.saved_unique_bytes = 0
        self._stack: list[tuple[str, int, int, int]] = []  # name, rss, cuda, saved so far
        self._saved_total = 0
        self._handles: list[Any] = []
        self._names: dict[int, str] = {}
        self._extra_pre = extra_pre
        self._extra_post = extra_post
        self._user_pack = user_pack
        self._user_unpack = user_unpack
        self._torch: Any = None
        self._failed = False

    # -- module hooks ----------------------------------------------------------
    def attach(self, root: Any) -> None:
        import torch

        self._torch = torch
        for name, module in root.named_modules():
            self._names[id(module)] = name or type(root).__name__
            self._handles.append(module.register_forward_pre_hook(self._pre))
            self._handles.append(module.register_forward_hook(self._post))

    def detach(self) -> None:
        for h in self._handles:
            try:
                h.remove()
            except Exception:
                pass
        self._handles.clear()

    @property
    def attached(self) -> bool:
        return bool(self._handles)

    def _fail(self, where: str) -> None:
        if not self._failed:
            self._failed = True
            log.exception("memsight: MemProfiler %s hook failed; its numbers stop (training continues)", where)

    def _pre(self, module: Any, args: Any) -> None:
        if not self.active:
            return
        try:
            name = self._names.get(id(module), type(module).__name__)
            rss, _ = host_memory()
            cuda = _cuda_allocated(self._torch)
            self._stack.append((name, rss, cuda, self._saved_total))
            module.rss_pre_forward = rss
            module.npp_pre_forward = self._saved_total
            for hook in self._extra_pre:
                hook(module, args)
        except Exception:
            self._fail("pre-forward")

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self.active:
            return
        try:
            name = self._names.get(id(module), type(module).__name__)
            # pop to this module's frame (a child that raised left its frame behind)
            while self._stack and self._stack[-1][0] != name:
                self._stack.pop()
            if not self._stack:
                return
            _, rss0, cuda0, saved0 = self._stack.pop()
            rss, _ = host_memory()
            cuda = _cuda_allocated(self._torch)
            row = self.modules.setdefault(name, {"calls": 0, "rss_delta": 0, "cuda_delta": 0, "saved_bytes": 0})
            row["calls"] += 1
            row["rss_delta"] += rss - rss0
            row["cuda_delta"] += cuda - cuda0
            row["saved_bytes"] += self._saved_total - saved0
            module.rss_post_forward = rss
            module.rss_diff = getattr(module, "rss_diff", 0) + (rss - rss0)
            module.npp_post_forward = self._saved_total
            module.npp_diff = self._saved_total - saved0
            for hook in self._extra_post:
                hook(module, args, output)
        except Exception:
            self._fail("post-forward")

    # -- saved tensors ---------------------------------------------------------
    def _pack(self, t: Any) -> Any:
        try:
            if not isinstance(t, self._torch.nn.Parameter):
                n = int(t.numel()) * int(t.element_size())
                where = self._stack[-1][0] if self._stack else OUTSIDE_MODULES
                row = self.saved.setdefault(where, {"bytes": 0, "tensors": 0})
                row["bytes"] += n
                row["tensors"] += 1
                self._saved_total += n
                key, size = _storage(t)
                if key not in self._seen:
                    self._seen.add(key)
                    self.saved_unique_bytes += size
        except Exception:
            self._fail("saved-tensor pack")
        return self._user_pack(t) if self._user_pack is not None else t

    def _unpack(self, packed: Any) -> Any:
        return self._user_unpack(packed) if self._user_unpack is not None else packed

    def saved_tensors_context(self) -> Any:
        import torch

        self._torch = torch
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    # -- per call ----------------------------------------------------------------
    def begin(self) -> None:
        self.modules = {}
        self.saved = {}
        self._seen = set()
        self.saved_unique_bytes = 0
        self._saved_total = 0
        self._stack = []
        self.active = True

    def end(self) -> dict[str, Any]:
        """Stops collecting; the call's tables as plain mappings."""
        self.active = False
        self._stack = []
        self._seen = set()
        return {
            "module_forward": {k: dict(v) for k, v in self.modules.items()},
            "saved_tensors": {k: dict(v) for k, v in self.saved.items()},
            "saved_tensors_bytes": self._saved_total,
            "saved_tensors_unique_bytes": self.saved_unique_bytes,
        }


def reset_module_attrs(root: Any, attrs: list[str], reset_hooks: list[Callable[..., Any]]) -> None:
    """Sets every ``attrs`` attribute present on each module to 0, then runs the reset hooks."""
    for module in root.modules():
        for attr in attrs:
            if hasattr(module, attr):
                try:
                    setattr(module, attr, 0)
                except Exception:
                    pass
        for hook in reset_hooks:
            try:
                hook(module, attrs)
            except Exception:
                log.exception("memsight: MemProfiler reset hook %r failed (training continues)", hook)
                return
