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

Kernels that take memory for themselves from the caching allocator, for
the kernel only, after their outputs:

- **torch's CUDA reductions** (``sum``, ``mean``: the bias gradients, a
  loss's mean) split a long reduction across thread blocks and stage the
  blocks' partial results in global memory: ``reduction_buffers`` follows
  torch's launch plan (Reduce.cuh's setReduceConfig) for the device's
  multiprocessors. Summing a (6304, 3072) float32 gradient over its rows
  (ViT-B/16's MLP bias at batch 32) takes 138,412,032 bytes;
- **layer norm** copies a non-contiguous input (forward and backward) and a
  non-contiguous incoming gradient (backward) to contiguous memory.

Library workspaces that live for one kernel (cuDNN's attention and
convolution plans) depend on the algorithm the library picks on the
device; they are listed in docs/estimate.md with their measured sizes and
are not added: a small real run calibrates them
(``memsight.torch.calibrate``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
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
        self.sms = _device_sms()
        self.unmodelled: set[str] = set()  # the cuDNN kernels the step ran (NOT_ADDED's keys)
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

    def _kernel_temporaries(self, trace: FakeTrace, name: str, args: Any) -> None:
        """What a reduction or a layer norm (forward or backward) allocates
        inside the kernel, after its outputs and freed before it returns."""
        x = args[0] if args else None
        if getattr(x, "device", None) is None or x.device.type != "cuda" or x.dim() == 0:
            return
        device = x.device.index or 0
        if name in _LAYER_NORM:
            # torch's CUDA layer norm makes its input contiguous where it is
            # not (expect_contiguous), and its backward the incoming gradient
            # too (dY.contiguous()): nn.MultiheadAttention hands the gradient
            # back transposed.
            sizes = [t.numel() * t.element_size() for t in args[:_LAYER_NORM[name]]
                     if hasattr(t, "is_contiguous") and not t.is_contiguous()]
            what, key = "copied contiguous for layer norm", "layer norm's contiguous copies (the largest)"
        else:
            dims = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else None
            # float accumulates half precision; integers go to int64
            acc = max(4, x.element_size()) if x.dtype.is_floating_point or x.dtype.is_complex else 8
            sizes = [n for n in reduction_buffers(list(x.shape), list(x.stride()), dims, acc, self.sms) if n]
            what, key = "reduction's staging buffer", "reductions' staging buffers (the largest)"
        held = [self._temporary(trace, device, n, what) for n in sizes if n > 0]
        if held:
            self.applied[key] = max(self.applied.get(key, 0), sum(n for _, _, n in held))
        for dev, addr, size in reversed(held):
            trace.free(dev, addr, size)

    def _after(self, trace: FakeTrace, func: Any, args: Any, out: Any) -> None:
        name = _op_name(func)
        if name == _EFFICIENT_BACKWARD:
            self._efficient_backward(trace)
            return
        if name in _REDUCE_OPS or name in _LAYER_NORM:
            self._kernel_temporaries(trace, name, args)
            return
        first = getattr(args[0] if args else None, "device", None)
        if name in _CUDNN_OPS and getattr(first, "type", "") == "cuda":  # the fake device, as torch.device
            self.unmodelled.add(_CUDNN_OPS[name])
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


    def notes(self) -> list[str]:
        """What the step ran that the estimate leaves out, with the sizes
        measured, for the report."""
        return [NOT_ADDED[k] for k in sorted(self.unmodelled)]


_EFFICIENT_BACKWARD = "_scaled_dot_product_efficient_attention_backward"
# cuDNN picks these kernels' workspaces on the device, for one kernel each.
_CUDNN_OPS = {"convolution": "conv", "_convolution": "conv", "convolution_backward": "conv",
              "cudnn_convolution": "conv", "_scaled_dot_product_flash_attention": "attention",
              "_scaled_dot_product_cudnn_attention": "attention"}
NOT_ADDED = {
    "conv": "cuDNN convolution workspaces, one kernel each, chosen by cuDNN on the device (up to 155MiB "
            "measured for ResNet-50 at batch 32 on an H200): memsight.torch.calibrate from two small real "
            "runs includes them",
    "attention": "cuDNN attention workspaces for half-precision attention, one kernel each (8MiB forward, "
                 "16.25MiB backward measured at 8 x 8 heads x 1024 x 64 on an H200): memsight.torch.calibrate "
                 "from two small real runs includes them",
}


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


# torch's CUDA reduction kernel (the sums of the bias gradients, means)
# splits a long reduction across thread blocks and stages their partial
# results in global memory it takes from the caching allocator for the
# kernel: ``acc size x outputs x blocks per output`` (x the threads of a
# block row when the reduction is not along the fastest dimension), and an
# int a block column for the semaphores. The launch plan below follows
# torch's setReduceConfig (Reduce.cuh); the device's streaming
# multiprocessors set the number of blocks.
_REDUCE_OPS = frozenset({"sum", "mean"})
_LAYER_NORM = {"native_layer_norm": 1, "native_layer_norm_backward": 2}  # how many leading tensors it copies
SMS = 132  # an H100 or H200; the GPU's own count where one is visible
THREADS_PER_SM = 2048


def _device_sms() -> int:
    try:
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)
    except Exception:  # noqa: BLE001 - no device to ask: the default
        pass
    return SMS


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def reduction_buffers(shape: Sequence[int], strides: Sequence[int], dims: Sequence[int] | None, acc: int,
                      sms: int = SMS) -> tuple[int, int]:
    """(bytes of the staging buffer, bytes of the semaphores) torch's CUDA
    reduction kernel allocates to reduce a tensor of ``shape`` and
    ``strides`` (in elements) over ``dims`` (None or empty: all),
    accumulating in ``acc`` bytes, on a device of ``sms`` multiprocessors;
    (0, 0) where its blocks need no global memory."""
    nd = len(shape)
    red = set(range(nd)) if not dims else {d % nd for d in dims}
    kept_sizes = [shape[i] for i in range(nd) if i not in red]
    out_stride, acc_stride = {}, 1  # the output: contiguous in the kept dimensions' order
    for i in reversed(range(nd)):
        if i not in red:
            out_stride[i], acc_stride = acc_stride, acc_stride * shape[i]
    # TensorIterator's order: reduced dimensions first (by the input's
    # strides), then the others (by the output's); size-1 dimensions dropped.
    order = sorted((i for i in range(nd) if shape[i] != 1),
                   key=lambda i: (0, strides[i]) if i in red else (1, out_stride[i]))
    dims_: list[list[int]] = []  # [size, input stride, output stride, reduced]
    for i in order:
        cur = [shape[i], strides[i], 0 if i in red else out_stride[i], i in red]
        if dims_:
            p = dims_[-1]
            if p[3] == cur[3] and p[0] * p[1] == cur[1] and p[0] * p[2] == cur[2]:
                p[0] *= cur[0]  # coalesced with the one before
                continue
        dims_.append(cur)
    num_outputs = 1
    for s in kept_sizes:
        num_outputs *= s
    numel = num_outputs
    for i in red:
        numel *= shape[i]
    inputs = numel // max(1, num_outputs)
    if not dims_ or inputs <= 1 or numel >= 1 << 31:
        return 0, 0
    nred = sum(1 for d in dims_ if d[3])
    fastest = nred == len(dims_) or dims_[0][1] < dims_[nred][1]
    if fastest:
        dim0, dim1, moving = inputs, num_outputs, dims_[0][1]
    else:
        dim0, dim1, moving = num_outputs, inputs, dims_[nred][1]
    vec = 1
    if moving == 1:
        if fastest and dim0 > 128 and nred == 1:
            dim0 //= 4  # loads vectorised along the input
        elif not fastest:
            vec = 4  # along the output, as far as sizes and strides divide
            for n in [dims_[nred][0]] + [d[1] for j, d in enumerate(dims_) if j != nred]:
                while n % vec:
                    vec //= 2
            dim0 //= vec
    most = 512 // vec
    p0 = most if dim0 >= most else _pow2_floor(dim0)
    p1 = most if dim1 >= most else _pow2_floor(dim1)
    width = min(p0, 32)
    height = min(p1, most // width)
    width = min(p0, most // height)
    step_in = step_out = 1
    if fastest:
        step_in *= width
    else:
        step_out *= width
    split_warps = -(-inputs // step_in) >= min(height * 16, 256)
    if split_warps:
        step_in *= height
    else:
        step_out *= height
    per_thread = -(-inputs // step_in)
    grid = -(-(num_outputs // vec) // step_out)
    target = sms * (THREADS_PER_SM // (width * height))
    if not (split_warps and per_thread >= 256 and grid <= target):
        return 0, 0
    ctas = max(min(-(-target // grid), -(-per_thread // 16)), -(-per_thread // 256))
    if ctas <= 1:
        return 0, 0
    size = acc * num_outputs * ctas * (1 if fastest else width * vec)
    return size, 4 * grid


def outside_allocator(world_size: int | None) -> list[dict[str, Any]]:
    """The memory a job holds outside torch's allocator, as measured above:
    the CUDA context, and NCCL's buffers for a rank of a distributed job."""
    terms: list[dict[str, Any]] = [{"name": "CUDA context and kernels (outside torch's allocator)",
                                    "bytes": CUDA_CONTEXT_BYTES}]
    if world_size and world_size > 1:
        terms.append({"name": "NCCL buffers, measured at 2 ranks (outside torch's allocator)",
                      "bytes": NCCL_BYTES})
    return [t for t in terms if t["bytes"] > 0]
