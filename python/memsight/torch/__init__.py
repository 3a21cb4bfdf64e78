"""memsight for PyTorch: record the CUDA allocator's history, and capture
memory from training jobs, including the moment they die of OOM.

torch is imported only when something here needs it; without CUDA every
class still imports and constructs, and the GPU-only ones warn once and
turn themselves off.

Recording::

    with memsight.torch.record(max_entries=100_000, stacks="python"):
        train_step()
        memsight.torch.dump("step.pickle.gz")

Marking the steps of a loop (for ``memsight leaks`` and ``diff --at-step``)::

    for batch in loader:
        memsight.torch.mark_step()
        train_step(batch)

Training callbacks (plain loop, Lightning via ``memsight.torch.lightning``)::

    cbs = memsight.torch.Callbacks(OOMObserver(), MemorySnapshot(), MemoryMonitor())

Per-phase profiling of chosen calls (see docs/memprofiler.md)::

    prof = memsight.torch.MemProfiler(collect_funcs={"default": ["train_step"]}).connect(model)
    train_step = prof.profile(train_step)

Every rank of a distributed job at the same moment (see docs/ranks.md)::

    memsight.torch.watch_ranks("dumps")              # on every rank, after init_process_group
    memsight.torch.dump_all_ranks("before_eval")     # on any rank: every rank writes its snapshot

Which line took the memory, which tensors hold it, and lending the GPU::

    with memsight.torch.LineProfiler(train_step) as prof:
        train_step()
    prof.print_stats()
    memsight.torch.MemReporter(model).report()
    with memsight.torch.Courtesy():
        ...  # CUDA tensors wait in host memory
"""

from __future__ import annotations

from .callback import Callback, CallbackProtocol, Callbacks
from .courtesy import Courtesy
from .line_profiler import (
    LineProfiler,
    clear_global_line_profiler,
    profile,
    profile_every,
    set_target_gpu,
)
from .mem_reporter import MemReporter
from .memory_monitor import MEMORY_KEYS, MemoryMonitor, memory_report
from .memory_snapshot import MemorySnapshot
from .memprofiler import MemProfiler, memprofilable
from .memprofiler_config import (
    CudaAllocatorHistoryOptions,
    MemProfilerCfg,
    MemProfilerFuncs,
    MemProfilerHooks,
    MemProfilerSchedule,
)
from .memprofiler_mixin import MemProfilerMixin
from .oom import OOMObserver
from .phase_marks import mark_step
from .profiler import ProfilerAction, TorchProfiler, TraceTime, cyclic_schedule
from .rank_dumps import DumpRound, RankDumps, dump_all_ranks, unwatch_ranks, watch_ranks
from .recording import (
    RecordOptions,
    Recording,
    dump,
    record,
    record_memory_history,
    recorder,
    snapshot,
    start_recording,
    stop_recording,
)
from .state import TrainState
from .tags import storage_tags
from .templates import (
    ensure_folder_is_empty,
    format_name_with_dist,
    format_name_with_dist_and_time,
    parse_uri,
    partial_format,
)
from .uploads import Uploader, flush as flush_uploads, set_default_destination
from ._dist import dist_info

__all__ = [
    "MEMORY_KEYS",
    "Callback",
    "CallbackProtocol",
    "Callbacks",
    "Courtesy",
    "DumpRound",
    "LineProfiler",
    "MemReporter",
    "MemoryMonitor",
    "MemorySnapshot",
    "CudaAllocatorHistoryOptions",
    "MemProfiler",
    "MemProfilerCfg",
    "MemProfilerFuncs",
    "MemProfilerHooks",
    "MemProfilerMixin",
    "MemProfilerSchedule",
    "OOMObserver",
    "ProfilerAction",
    "RankDumps",
    "TorchProfiler",
    "TraceTime",
    "cyclic_schedule",
    "RecordOptions",
    "Recording",
    "TrainState",
    "Uploader",
    "clear_global_line_profiler",
    "dist_info",
    "dump",
    "dump_all_ranks",
    "ensure_folder_is_empty",
    "mark_step",
    "flush_uploads",
    "format_name_with_dist",
    "format_name_with_dist_and_time",
    "memory_report",
    "memprofilable",
    "parse_uri",
    "partial_format",
    "profile",
    "profile_every",
    "record",
    "record_memory_history",
    "recorder",
    "set_default_destination",
    "set_target_gpu",
    "snapshot",
    "start_recording",
    "stop_recording",
    "storage_tags",
    "unwatch_ranks",
    "watch_ranks",
]
