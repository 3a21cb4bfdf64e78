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

MemoryMonitor (or a MemoryWatch of its own) warns when the allocator's
growth would run the job out of memory before it ends.

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

Will it fit, before it runs (docs/estimate.md)::

    est = memsight.torch.estimate(step, model=make_model, optimizer=lambda p: torch.optim.AdamW(p),
                                  inputs=lambda i: make_batch(8), device_memory="80GiB")
    best, _ = memsight.torch.max_batch(lambda n, i: make_batch(n), step, make_model, ...)

Every public name is imported from here. The code sits in rooms: capture/
(recording and its native unwinder, tags, phase marks, the native dumper and
counters, rank dumps),
callbacks/ (callbacks and the OOM observer, snapshots, monitor, uploads),
profilers/ (torch.profiler, MemProfiler, the line profiler), tensors/
(MemReporter, Courtesy); native/ holds the C++ built on first use and _util/
the private helpers. ``memsight.torch.lightning`` needs Lightning, so it is
imported on its own.
"""

from __future__ import annotations

# The public names, room by room.
from .capture.phase_marks import mark_step
from .capture.rank_dumps import DumpRound, RankDumps, dump_all_ranks, unwatch_ranks, watch_ranks
from .capture.recording import (
    RecordOptions,
    Recording,
    dump,
    native_record,
    record,
    record_memory_history,
    recorder,
    snapshot,
    start_recording,
    stop_recording,
)
from .capture.tags import storage_tags
from .callbacks.callback import Callback, CallbackProtocol, Callbacks
from .callbacks.memory_monitor import MEMORY_KEYS, MemoryMonitor, memory_report
from .callbacks.memory_snapshot import MemorySnapshot
from .callbacks.memory_watch import MemoryProjection, MemorySample, MemoryWatch
from .callbacks.oom import OOMObserver
from .callbacks.state import TrainState
from .callbacks.templates import (
    ensure_folder_is_empty,
    format_name_with_dist,
    format_name_with_dist_and_time,
    parse_uri,
    partial_format,
)
from .callbacks.uploads import Uploader, flush as flush_uploads, set_default_destination
from .fit import Estimate, calibrate, estimate, max_batch
from .profilers.line_profiler import (
    LineProfiler,
    clear_global_line_profiler,
    profile,
    profile_every,
    set_target_gpu,
)
from .profilers.memprofiler import MemProfiler, memprofilable
from .profilers.memprofiler_config import (
    CudaAllocatorHistoryOptions,
    MemProfilerCfg,
    MemProfilerFuncs,
    MemProfilerHooks,
    MemProfilerSchedule,
)
from .profilers.memprofiler_mixin import MemProfilerMixin
from .profilers.torch_profiler import ProfilerAction, TorchProfiler, TraceTime, cyclic_schedule
from .tensors.courtesy import Courtesy
from .tensors.mem_reporter import MemReporter
from ._util.dist import dist_info

# Earlier docs reached the recorder as ``memsight.torch.recording.recorder``.
from .capture import recording as recording

__all__ = [
    "Estimate",
    "MEMORY_KEYS",
    "Callback",
    "CallbackProtocol",
    "Callbacks",
    "Courtesy",
    "DumpRound",
    "LineProfiler",
    "MemReporter",
    "MemoryMonitor",
    "MemoryProjection",
    "MemorySample",
    "MemorySnapshot",
    "MemoryWatch",
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
    "native_record",
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
    "calibrate",
    "estimate",
    "max_batch",
]
