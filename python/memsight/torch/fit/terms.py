"""What fake tensors cannot see, added to the estimate's requests.

Measured on an H200 with torch 2.11 (bench/estimate_check.py, the real run's
allocations with C++ stacks against the fake run's; docs/estimate.md):

- **cuBLAS workspace**: 32 MiB, allocated through torch's caching allocator
  at the first cuBLAS call of each thread (one handle per thread and stream)
  and kept for the life of the process: one for the forward and optimizer
  on the main thread, one for autograd's backward thread. Its size is
  ``CUBLAS_WORKSPACE_CONFIG`` (``:SIZE_KIB:COUNT`` pairs; torch's default on
  Hopper is ``:4096:8``).
- **cuBLASLt workspace**: 1 MiB (``TORCH_CUBLASLT_WORKSPACE_SIZE``, in KiB),
  at the first matrix product with a bias (``addmm``), kept likewise.

Memory outside torch's allocator (not in ``max_memory_reserved()``, but
cudaMalloc cannot have it), measured as the device's used memory less
torch's reserved memory, before and after three steps of the 4-layer Llama
of tests/gpu/estimate_workloads.py (an FSDP2 rank; 2026-11-29):

- **the CUDA context and the kernels loaded**: 877,461,504 bytes after the
  steps (648,871,936 before them: cuBLAS, cuDNN and the kernels load
  lazily); on another H200 host 804-808 MB after the steps of the Llama,
  ViT-B/16 and ResNet-50 alike. The larger figure is the default;
- **NCCL's buffers**: 809,566,208 bytes more on each rank of a real 2-rank
  NCCL job (one NVLink peer; more peers take more, not measured).

The memory-efficient attention's backward (torch's CUDA implementation,
which its fake kernel does not follow) also allocates inside the kernel:
``grad_out`` made contiguous in (batch, tokens, heads, dim) order where it
is not, and the softmax's row sums in float32, which for float32 inputs it
computes with two temporaries (the product of ``grad_out`` and ``out``, and
its sum) and for half-precision inputs leaves to the kernel. These are
added around the operator at their sizes; a split-keys workspace it may
also take depends on the kernel chosen and is not.

Library workspaces that live for one kernel (cuDNN's attention and
convolution plans) depend on the algorithm the library picks on the
device; they are listed in docs/estimate.md with their measured sizes and
are not added: a small real run calibrates them
(``memsight.torch.calibrate``).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .fake_trace import FakeTrace

CUDA_CONTEXT_BYTES = 877_461_504
NCCL_BYTES = 809_566_208

_CUBLAS_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "_addmm_activation", "addmv", "mv",
                         "_scaled_mm", "_int_mm"})


def cublas_workspace_bytes(env: dict[str, str] | None = None) -> int:
    """The cuBLAS workspace torch gives each handle: CUBLAS_WORKSPACE_CONFIG
    (":4096:8" is 8 chunks of 4096 KiB), else torch's default on Hopper."""
    conf = (env if env is not None else os.environ).get("CUBLAS_WORKSPACE_CONFIG", "")
    parts = [p for p in conf.split(":") if p]
    if parts and len(parts) % 2 == 0 and all(p.isdigit() for p in parts):
        return sum(int(parts[i]) * 1024 * int(parts[i + 1]) for i in range(0, len(parts), 2))
    return 4096 * 1024 * 8


def cublaslt_workspace_bytes(env: dict[str, str] | None = None) -> int:
    value = (env if env is not None else os.environ).get("TORCH_CUBLASLT_WORKSPACE_SIZE", "")
    return int(value) * 1024 if value.isdigit() else 1 << 20


class Terms:
    """Adds the persistent library workspaces to a FakeTrace as the step
    runs; ``applied`` lists each term and its bytes for the report."""

    def __init__(self, cublas: bool = True, cublaslt: bool = True) -> None:
        self.cublas = cublas_workspace_bytes() if cublas else 0
        self.cublaslt = cublaslt_workspace_bytes() if cublaslt else 0
        self._seen: set[tuple[str, int, int, int]] = set()  # (term, thread, device, stream)
        self.applied: dict[str, int] = {}
        # By thread, the operator running: what it allocates inside, and the
        # temporaries it made before its outputs, as (device, address, bytes).
        self._running: dict[int, tuple[tuple[int, int, list[int]], list[tuple[int, int, int]]]] = {}

    def attach(self, trace: FakeTrace) -> None:
        trace.before.append(lambda func, args: self._before(trace, func, args))
        trace.hooks.append(lambda func, args, out: self._after(trace, func, args, out))

    def finish(self, trace: FakeTrace) -> None:
        pass

    def _add(self, trace: FakeTrace, term: str, size: int, device: int) -> None:
        key = (term, threading.get_ident(), device, trace.stream())  # a handle per thread and stream
        if size <= 0 or key in self._seen:
            return
        self._seen.add(key)
        frame = {"name": f"{term} (memsight estimate)", "filename": "<estimate>", "line": 0}
        trace.alloc(device, size, [frame, *trace.stack()])
        self.applied[term] = self.applied.get(term, 0) + size

    def _temporary(self, trace: FakeTrace, device: int, size: int, what: str) -> tuple[int, int, int]:
        frame = {"name": f"{what} (memsight estimate)", "filename": "<estimate>", "line": 0}
        return device, trace.alloc(device, size, [frame, *trace.stack()]), size

    def _before(self, trace: FakeTrace, func: Any, args: Any) -> None:
        if _op_name(func) != _EFFICIENT_BACKWARD:
            return
        plan = efficient_backward_temporaries(args)
        self._running.pop(threading.get_ident(), None)  # one that raised leaves nothing behind
        if plan is not None:
            held = [self._temporary(trace, plan[0], plan[1], "grad_out made contiguous")] if plan[1] else []
            self._running[threading.get_ident()] = (plan, held)

    def _efficient_backward(self, trace: FakeTrace) -> None:
        running = self._running.pop(threading.get_ident(), None)
        if running is None:
            return
        (device, _, during), held = running
        held += [self._temporary(trace, device, n, "softmax row sums") for n in during]
        total = sum(n for _, _, n in held)
        key = "memory-efficient attention backward's temporaries (the largest)"
        self.applied[key] = max(self.applied.get(key, 0), total)
        for dev, addr, size in held:
            trace.free(dev, addr, size)

    def _after(self, trace: FakeTrace, func: Any, args: Any, out: Any) -> None:
        name = _op_name(func)
        if name == _EFFICIENT_BACKWARD:
            self._efficient_backward(trace)
            return
        if name not in _CUBLAS_OPS:
            return
        device = getattr(out, "device", None)
        if device is None or device.type != "cuda":
            return
        index = device.index or 0
        self._add(trace, "cuBLAS workspace", self.cublas, index)
        bias = args[0] if args else None
        if name in ("addmm", "_addmm_activation") and getattr(bias, "dim", lambda: 0)() == 1:
            self._add(trace, "cuBLASLt workspace", self.cublaslt, index)


_EFFICIENT_BACKWARD = "_scaled_dot_product_efficient_attention_backward"


def _op_name(func: Any) -> str:
    return str(getattr(getattr(func, "overloadpacket", None), "__name__", ""))


def efficient_backward_temporaries(args: Any) -> tuple[int, int, list[int]] | None:
    """What torch's memory-efficient attention backward allocates inside,
    for its arguments (grad_out, query, key, value, bias, out, ...: SDPA's
    batch x heads x tokens x dim order): (device, bytes of the contiguous
    copy of grad_out made first, 0 if none, [bytes of the temporaries made
    after the gradients]); None where it does not run on CUDA as modelled
    (batches above 65,535 go in chunks)."""
    grad_out = args[0] if args else None
    if grad_out is None or getattr(grad_out, "device", None) is None or grad_out.device.type != "cuda" \
            or grad_out.dim() != 4 or grad_out.size(0) > 65535:
        return None
    b, h, m, kv = (int(n) for n in grad_out.shape)
    item = grad_out.element_size()
    copy = 0 if grad_out.transpose(1, 2).is_contiguous() else b * h * m * kv * item
    if item == 2:  # the kernel computes the row sums into an empty float32 tensor
        return grad_out.device.index or 0, copy, [b * h * m * 4]
    # (grad_out * out) in float32, its sum over the last dimension, and that
    # sum transposed and made contiguous.
    return grad_out.device.index or 0, copy, [b * m * h * kv * 4, b * m * h * 4, b * h * m * 4]


def outside_allocator(world_size: int | None) -> list[dict[str, Any]]:
    """The memory a job holds outside torch's allocator, as measured above:
    the CUDA context, and NCCL's buffers for a rank of a distributed job."""
    terms: list[dict[str, Any]] = [{"name": "CUDA context and kernels (outside torch's allocator)",
                                    "bytes": CUDA_CONTEXT_BYTES}]
    if world_size and world_size > 1:
        terms.append({"name": "NCCL buffers, measured at 2 ranks (outside torch's allocator)",
                      "bytes": NCCL_BYTES})
    return [t for t in terms if t["bytes"] > 0]
