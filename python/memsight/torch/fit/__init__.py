"""Will it fit? A training step's peak memory, allocated and reserved,
before it runs, and the largest batch that fits (docs/estimate.md)::

    est = memsight.torch.estimate(step, model=make_model, optimizer=lambda p: torch.optim.AdamW(p),
                                  inputs=lambda i: make_batch(8), device_memory="80GiB")
    print(est)            # peaks, fits or not, what was added for what fake tensors cannot see
    est.save("step.pickle")  # a torch memory snapshot: memsight summary / view / whatif read it
"""

from __future__ import annotations

from .api import Estimate, estimate, max_batch
from .calibrate import calibrate
from .step_trace import trace_step
from .terms import Terms

__all__ = ["Estimate", "Terms", "calibrate", "estimate", "max_batch", "trace_step"]
