"""TorchProfiler: torch.profiler over chosen batches, traces per rank with
file naming, uploads and retention that work, and the categorised memory
timeline as memsight's interactive page.

Composer's parameters and defaults, on memsight's callback protocol::

    prof = TorchProfiler(schedule=cyclic_schedule(wait=1, warmup=1, active=3),
                         memory_filename="rank{rank}.{batch}.memory.html",
                         record_shapes=True, with_stack=True)
    with Callbacks(prof, run_name="exp1") as cbs:
        for batch in loader:
            cbs.batch_start(); train_step(batch); cbs.batch_end()
    prof.saved_traces     # {TraceTime(epoch, batch, batch_in_epoch): [trace, page]}

Read a trace with ``memsight profile TRACE`` (per-step memory and time).
"""

from __future__ import annotations

import enum
import logging
import os
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .._util.atomic import write_atomic
from .._util.cuda import cuda_available, torch_module
from .._util.dist import dist_info
from ..callbacks._files import FileCallback
from ..capture.recording import Recording, dump
from ..callbacks.state import TrainState
from ..callbacks.templates import format_name_with_dist_and_time
from ..callbacks.uploads import remote_uri, shared_uploader

log = logging.getLogger("memsight")


class ProfilerAction(enum.Enum):
    """What the profiler does in a batch (Composer's names)."""

    SKIP = "skip"
    WARMUP = "warmup"
    ACTIVE = "active"
    ACTIVE_AND_SAVE = "active_and_save"


class cyclic_schedule:  # noqa: N801  (a function in Composer; a class here so it can be inspected)
    """Composer's cycle over the batches of each epoch: ``skip_first`` batches
    (counted from the batch a resumed run started at), then cycles of
    ``wait`` skipped, ``warmup`` warm-up and ``active`` recorded batches, the
    cycle's last batch saved; ``repeat`` cycles per epoch (0: until the
    epoch ends). The epoch's last batch is saved if it is recorded.

    Called with a :class:`TrainState` (``batch_in_epoch``, and
    ``dataloader_len`` when known) it gives a :class:`ProfilerAction`; with a
    step number it gives torch's ``ProfilerAction``, so it also works as a
    plain ``torch.profiler.profile(schedule=...)``.
    """

    def __init__(self, skip_first: int = 0, wait: int = 0, warmup: int = 1, active: int = 4, repeat: int = 1) -> None:
        for name, v in (("skip_first", skip_first), ("wait", wait), ("warmup", warmup), ("repeat", repeat)):
            if int(v) < 0:
                raise ValueError(f"{name} must be >= 0, not {v!r}")
        if int(active) < 1:
            raise ValueError(f"active must be >= 1, not {active!r}")
        self.skip_first, self.wait, self.warmup = int(skip_first), int(wait), int(warmup)
        self.active, self.repeat = int(active), int(repeat)
        #: The batch (in its epoch) a resumed run started at: skip_first counts from there.
        self.resumption_batch_idx = 0

    def action(self, batch_in_epoch: int, dataloader_len: int | None = None) -> ProfilerAction:
        skip = self.skip_first + self.resumption_batch_idx
        if batch_in_epoch < skip:
            return ProfilerAction.SKIP
        b = batch_in_epoch - skip
        cycle = self.wait + self.warmup + self.active
        if self.repeat != 0 and b >= cycle * self.repeat:
            return ProfilerAction.SKIP
        pos = b % cycle
        if pos < self.wait:
            return ProfilerAction.SKIP
        if pos < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        last_of_epoch = dataloader_len is not None and batch_in_epoch == dataloader_len - 1
        return ProfilerAction.ACTIVE_AND_SAVE if pos == cycle - 1 or last_of_epoch else ProfilerAction.ACTIVE

    def __call__(self, when: Any) -> Any:
        if isinstance(when, int):  # torch.profiler's step number
            return TORCH_ACTION[self.action(when)]()
        return self.action(int(when.batch_in_epoch), getattr(when, "dataloader_len", None))

    def __repr__(self) -> str:
        return (f"cyclic_schedule(skip_first={self.skip_first}, wait={self.wait}, warmup={self.warmup}, "
                f"active={self.active}, repeat={self.repeat})")


def _torch_action(name: str) -> Any:
    return lambda: getattr(torch_module().profiler.ProfilerAction, name)


TORCH_ACTION = {
    ProfilerAction.SKIP: _torch_action("NONE"),
    ProfilerAction.WARMUP: _torch_action("WARMUP"),
    ProfilerAction.ACTIVE: _torch_action("RECORD"),
    ProfilerAction.ACTIVE_AND_SAVE: _torch_action("RECORD_AND_SAVE"),
}


def snapshot_path(trace: str) -> str:
    """``rank0.3.pt.trace.json.gz`` -> ``rank0.3.memory_snapshot.pickle``."""
    stem = trace
    for suffix in (".gz", ".json", ".pt.trace"):
        stem = stem[: -len(suffix)] if stem.endswith(suffix) else stem
    return stem + ".memory_snapshot.pickle"


@dataclass(frozen=True)
class TraceTime:
    """When a trace was saved: the batch that closed its window."""

    epoch: int
    batch: int
    batch_in_epoch: int


class TorchProfiler(FileCallback):
    """torch.profiler on the batches ``schedule`` chooses (default
    :func:`cyclic_schedule`), with Composer's parameters and defaults.

    Each saved window writes ``{folder}/{filename}`` (``.gz`` appended with
    ``use_gzip``) and, with ``memory_filename`` (which must end in ``.html``
    and needs profile_memory, record_shapes and with_stack), memsight's page
    of torch's categorised memory timeline. Files are uploaded to
    ``remote_file_name`` / ``memory_remote_file_name`` (``None``: local only).
    ``saved_traces`` maps each save's :class:`TraceTime` to its files;
    ``num_traces_to_keep`` deletes the oldest local traces once they are
    uploaded (-1 keeps all; 0 deletes each once uploaded). At ``close`` the op
    tables are logged (``op_tables``). Works with CPU-only torch; a failed
    export or upload is logged, never raised into training.

    ``model=`` / ``optimizer=`` (on CUDA): the allocator history is recorded
    over the same windows, their storages tagged and phases marked, and each
    save also writes ``{trace name}.memory_snapshot.pickle`` beside the trace
    (local only): memsight's memory kinds of the very batches torch's memory
    timeline categorised.
    """

    def __init__(
        self,
        folder: str = "{run_name}/torch_traces",
        filename: str = "rank{rank}.{batch}.pt.trace.json",
        remote_file_name: str | None = "{run_name}/torch_traces/rank{rank}.{batch}.pt.trace.json",
        memory_filename: str | None = None,
        memory_remote_file_name: str | None = "{run_name}/torch_memory_traces/rank{rank}.{batch}.pt.trace.memory.html",
        overwrite: bool = False,
        use_gzip: bool = False,
        record_shapes: bool = False,
        profile_memory: bool = True,
        with_stack: bool = False,
        with_flops: bool = True,
        num_traces_to_keep: int = -1,
        *,
        schedule: Any = None,
        model: Any = None,
        optimizer: Any = None,
    ) -> None:
        if use_gzip:
            if not filename.endswith(".gz"):
                filename += ".gz"
            if remote_file_name and not remote_file_name.endswith(".gz"):
                remote_file_name += ".gz"
        super().__init__(folder, filename, remote_file_name, overwrite)
        if memory_filename is not None:
            if not str(memory_filename).endswith(".html"):
                raise ValueError(f"memory_filename must end in .html, not {memory_filename!r}")
            if not (profile_memory and record_shapes and with_stack):
                raise ValueError(
                    "memory_filename needs profile_memory=True, record_shapes=True and with_stack=True "
                    f"(got profile_memory={profile_memory}, record_shapes={record_shapes}, with_stack={with_stack})"
                )
        if memory_remote_file_name and not str(memory_remote_file_name).endswith(".html"):
            raise ValueError(f"memory_remote_file_name must end in .html, not {memory_remote_file_name!r}")
        if int(num_traces_to_keep) < -1:
            raise ValueError(f"num_traces_to_keep must be -1 (keep all) or >= 0, not {num_traces_to_keep!r}")
        self.memory_filename = memory_filename
        self.memory_remote_file_name = memory_remote_file_name or None
        self.use_gzip = bool(use_gzip)
        self.record_shapes, self.profile_memory = bool(record_shapes), bool(profile_memory)
        self.with_stack, self.with_flops = bool(with_stack), bool(with_flops)
        self.num_traces_to_keep = int(num_traces_to_keep)
        self.schedule = schedule if schedule is not None else cyclic_schedule()
        #: Each save: its time and the local files written for it, oldest first.
        self.saved_traces: OrderedDict[TraceTime, list[str]] = OrderedDict()
        #: The op tables logged at close, by sort key.
        self.op_tables: dict[str, str] = {}
        self.action = ProfilerAction.SKIP
        self._prof: Any = None
        self._deleted: set[str] = set()
        self._recording = Recording(owner="TorchProfiler", model=model, optimizer=optimizer)

    # -- the protocol ------------------------------------------------------------
    def _on_fit_start(self, state: TrainState) -> None:
        if self._prof is not None:
            return
        self._set_up_folder(state)
        torch = torch_module()
        try:
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                torch.distributed.barrier()  # every rank's folder checked before anyone writes
        except Exception:
            log.warning("memsight: TorchProfiler could not synchronise the ranks", exc_info=True)
        acts = [torch.profiler.ProfilerActivity.CPU]
        if cuda_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        self.action = self._decide(state)
        self._prof = torch.profiler.profile(
            activities=acts,
            schedule=lambda _step: TORCH_ACTION[self.action](),
            on_trace_ready=self._on_trace_ready,
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
            with_flops=self.with_flops,
        )
        self._prof.__enter__()
        self._follow_window()

    def attach_model(self, model: Any, optimizer: Any = None) -> None:
        """Drivers that know the model (Lightning) do not turn history
        recording on here: it costs time in the windows being profiled.
        Pass ``model=`` to have it."""

    def _follow_window(self) -> None:
        """Records the allocator history while the profiler records, when a
        model or optimizer was handed over."""
        rec = self._recording
        if rec.model is None and rec.optimizer is None:
            return
        if self.action != ProfilerAction.SKIP:
            rec.start()
        else:
            rec.stop()

    def _decide(self, state: TrainState) -> ProfilerAction:
        try:
            return self.schedule(state)
        except Exception:
            log.exception("memsight: TorchProfiler's schedule failed; skipping this batch")
            return ProfilerAction.SKIP

    def _on_batch_start(self, state: TrainState) -> None:
        self.state = state

    def _on_batch_end(self, state: TrainState) -> None:
        self.state = state
        if self._prof is None:
            return
        # torch asks the schedule for the next batch's action inside step():
        # the counters already say which batch comes next.
        self.action = self._decide(state)
        if self.action != ProfilerAction.SKIP:
            self._follow_window()  # before the step: the next batch is recorded
        self._prof.step()
        if self.action == ProfilerAction.SKIP:
            self._follow_window()  # after it: the saved window's history is written
        self._prune()

    def _on_close(self) -> None:
        self._recording.stop()
        prof, self._prof = self._prof, None
        if prof is not None:
            try:
                prof.__exit__(None, None, None)
            except Exception:
                log.exception("memsight: TorchProfiler could not stop torch.profiler")
            self._log_op_tables(prof)
        self._flush_uploads()
        self._prune()

    # -- saving ------------------------------------------------------------------
    def _on_trace_ready(self, prof: Any) -> None:
        try:
            self._save(prof)
        except Exception:
            log.exception("memsight: TorchProfiler could not save the trace (training continues)")

    def _save(self, prof: Any) -> None:
        state = self.state or TrainState()
        run = state.ensure_run_name()
        folder = self.folder_name or "."
        trace = os.path.join(folder, format_name_with_dist_and_time(self.filename, run, state))
        os.makedirs(os.path.dirname(trace) or ".", exist_ok=True)
        tmp = trace + ".tmp" + (".gz" if trace.endswith(".gz") else "")
        if hasattr(prof, "add_metadata_json"):
            prof.add_metadata_json("global_rank", str(dist_info().get("rank", 0)))
        prof.export_chrome_trace(tmp)  # gzip when the name ends in .gz
        os.replace(tmp, trace)
        files = [trace]
        self._upload_as(trace, self.remote_file_name, state)
        if self.memory_filename:
            page = os.path.join(folder, format_name_with_dist_and_time(self.memory_filename, run, state))
            if self._write_memory_page(prof, page):
                files.append(page)
                self._upload_as(page, self.memory_remote_file_name, state)
        if self._recording.active:
            snap = snapshot_path(trace)
            try:
                dump(snap)
                files.append(snap)
            except Exception as e:
                log.error("memsight: TorchProfiler could not write %s: %s: %s", snap, type(e).__name__, e)
        when = TraceTime(state.epoch, state.batch, state.batch_in_epoch)
        self.saved_traces[when] = files
        self.written.extend(files)
        log.info("memsight: TorchProfiler saved %s", ", ".join(files))

    def _write_memory_page(self, prof: Any, page: str) -> bool:
        import memsight

        torch = torch_module()
        device = f"cuda:{torch.cuda.current_device()}" if cuda_available() else "cpu"
        with tempfile.TemporaryDirectory(prefix="memsight-timeline-") as tmp:
            raw = os.path.join(tmp, "timeline.json.gz")
            try:
                import warnings

                with warnings.catch_warnings():  # deprecated in torch 2.11, still the one exporter
                    warnings.simplefilter("ignore")
                    prof.export_memory_timeline(raw, device=device)
                html = memsight.profile_timeline_html(raw, title=os.path.basename(page))
            except Exception as e:
                log.error("memsight: TorchProfiler could not write the memory timeline %s: %s: %s",
                          page, type(e).__name__, e)
                return False
        try:
            write_atomic(page, html.encode("utf-8"))
        except OSError as e:
            log.error("memsight: TorchProfiler could not write %s: %s", page, e)
            return False
        return True

    def _upload_as(self, path: str, remote: str | None, state: TrainState) -> None:
        if not remote:
            return
        try:
            name = format_name_with_dist_and_time(remote, state.ensure_run_name(), state).lstrip("/")
            uri = remote_uri(os.path.dirname(name), os.path.basename(name))
            if uri is None:
                log.info("memsight: %s has no destination (no scheme, no default): it stays local", remote)
                return
            shared_uploader().upload(path, uri, overwrite=self.overwrite)
        except Exception:
            log.exception("memsight: could not queue %s for upload", path)

    # -- retention -----------------------------------------------------------------
    def _uploaded(self, path: str) -> bool:
        if not self.remote_file_name:
            return True  # nothing to wait for
        up = shared_uploader()
        with up._lock:
            return any(r.local_path == path and r.ok for r in up.results)

    def _prune(self) -> None:
        """Deletes the oldest local traces beyond ``num_traces_to_keep``, each
        once its upload has finished (remote copies are never deleted)."""
        if self.num_traces_to_keep < 0:
            return
        saves = list(self.saved_traces.values())
        excess = len(saves) - self.num_traces_to_keep
        for files in saves[: max(0, excess)]:
            for path in files:
                if path in self._deleted or not self._uploaded(path):
                    continue
                try:
                    os.remove(path)
                    self._deleted.add(path)
                    log.info("memsight: TorchProfiler removed the local %s (num_traces_to_keep=%d)",
                             path, self.num_traces_to_keep)
                except FileNotFoundError:
                    self._deleted.add(path)
                except OSError as e:
                    log.warning("memsight: could not remove %s: %s", path, e)

    # -- the op table --------------------------------------------------------------
    def _log_op_tables(self, prof: Any) -> None:
        keys = ["cpu_time_total"]
        if self.profile_memory:
            keys.append("self_cpu_memory_usage")
        if cuda_available():
            keys += ["cuda_time_total"] + (["self_cuda_memory_usage"] if self.profile_memory else [])
        try:
            averages = prof.key_averages()
        except Exception as e:  # nothing was recorded
            log.info("memsight: TorchProfiler has no op table: %s", e)
            return
        for key in keys:
            try:
                self.op_tables[key] = averages.table(sort_by=key, row_limit=20)
                log.info("memsight: TorchProfiler ops by %s:\n%s", key, self.op_tables[key])
            except Exception as e:
                log.info("memsight: TorchProfiler has no table by %s: %s", key, e)

    def __repr__(self) -> str:
        return f"TorchProfiler(schedule={self.schedule!r}, folder={self.folder!r})"
