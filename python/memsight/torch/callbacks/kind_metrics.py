"""Memory by kind, as metrics: how much of what is allocated now is the
model's parameters, their gradients, the optimizer's state and the buffers,
counted from the tensors themselves (the tags of tags.py), and the rest
(activations, temporaries, autograd's own, anything else)."""

from __future__ import annotations

from typing import Any

from ..capture.tags import storage_tags
from .memory_monitor import to_gigabytes

#: The kinds counted from the model and optimizer, in the order they are logged.
KINDS = ("parameter", "gradient", "optimizer_state", "buffer")


def kind_report(model: Any, optimizer: Any = None, allocated: int | None = None,
                device_type: str | None = "cuda") -> dict[str, float]:
    """``{kind}_mem`` for each of :data:`KINDS` and, given the allocated bytes
    now, ``other_mem`` (what the four leave): decimal GB, as MemoryMonitor's.
    Tensors on ``device_type`` devices count (None: all)."""
    sizes = dict.fromkeys(KINDS, 0)
    for tag in storage_tags(model, optimizer, device_type):
        sizes[tag["category"]] += int(tag["size"])
    report = {f"{kind}_mem": to_gigabytes(n) for kind, n in sizes.items()}
    if allocated is not None:
        report["other_mem"] = to_gigabytes(max(0, int(allocated) - sum(sizes.values())))
    return report
