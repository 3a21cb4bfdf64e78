"""Will it fit? A training step's memory before it runs (docs/estimate.md)."""

from __future__ import annotations

from .step_trace import trace_step

__all__ = ["trace_step"]
