"""Scaled dot-product attention as a GPU runs it, estimated where there is none.

``F.scaled_dot_product_attention`` picks its kernel from the device's
properties: on a GPU, a fused kernel (flash, memory-efficient or cuDNN
attention) that never holds the attention matrix. Without a GPU to ask (no
device, or a torch built without CUDA), the choice fails over to the math
kernel, which holds the whole matrix for the backward: for a 1.1-billion
parameter decoder at 4 x 2048 tokens, some 50 GiB that no real run
allocates. So where no GPU answers, the estimate calls the fused kernel a
GPU would pick itself: flash attention for half-precision inputs with no
mask and a head of at most 256, memory-efficient attention otherwise (it
takes a mask and float32), each through its own operator, whose fake
implementation gives the outputs the real kernel allocates and whose
backward is the fused one's. (On the H200, torch 2.11 ran cuDNN attention
for the half-precision case; in torch 2.6's fake kernels its outputs and
flash attention's are of the same shapes and dtypes.) Anything these two cannot take
(dropout with a mask, heads above 256, nested tensors) is left to torch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

_HALF = ("float16", "bfloat16")


def _fused(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
           is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
    """The output of the fused kernel a GPU would run, or None to leave it to torch."""
    import torch

    aten = torch.ops.aten
    if not all(isinstance(t, torch.Tensor) and t.device.type == "cuda" and t.dim() == 4
               for t in (query, key, value)) or query.is_nested:
        return None
    head = query.size(-1)
    if head > 256 or value.size(-1) != head:
        return None
    if enable_gqa and key.size(1) != query.size(1):
        rep = query.size(1) // key.size(1)
        key, value = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
    kw = {"scale": scale} if scale is not None else {}
    if attn_mask is None and str(query.dtype).rsplit(".", 1)[-1] in _HALF:
        return aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False, **kw)[0]
    if attn_mask is not None and dropout_p:
        return None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # The efficient kernel takes an additive bias: a boolean mask becomes one.
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill_(~attn_mask, -math.inf)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    return aten._scaled_dot_product_efficient_attention(query, key, value, attn_mask, needs_grad, dropout_p,
                                                        is_causal, **kw)[0]


@contextlib.contextmanager
def fused_attention_mode() -> Iterator[None]:
    """While it is entered, ``F.scaled_dot_product_attention`` on CUDA fake
    tensors runs through the fused kernel a GPU would choose: a torch-function
    mode catches the calls made from the step, and the name in
    ``torch.nn.functional`` is replaced for the calls its own Python
    functions make (``multi_head_attention_forward``, which
    ``nn.MultiheadAttention`` and torchvision's ViT run): torch takes the
    mode off its stack while such a function runs, so the mode alone never
    sees the attention inside it."""
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    found = getattr(F, "scaled_dot_product_attention", None)
    if found is None:
        yield
        return
    original: Callable[..., Any] = found

    def attention(*args: Any, **kwargs: Any) -> Any:
        try:
            out = _fused(*args, **kwargs)
        except TypeError:  # arguments this version of the rule does not know: torch's own path
            out = None
        return original(*args, **kwargs) if out is None else out

    class _FusedAttention(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if func is original:
                return attention(*args, **(kwargs or {}))
            return func(*args, **(kwargs or {}))

    setattr(F, "scaled_dot_product_attention", attention)  # noqa: B010 - torch's own name, put back after
    try:
        with _FusedAttention():
            yield
    finally:
        setattr(F, "scaled_dot_product_attention", original)  # noqa: B010
