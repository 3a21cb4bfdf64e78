"""Profilers: torch.profiler driven as a callback (torch_profiler), the
per-phase memory profiler (memprofiler and its config, hooks, outputs and
page), and the line profiler with its native hook backend and its tables.

The public names are re-exported by ``memsight.torch``; import them from there."""
