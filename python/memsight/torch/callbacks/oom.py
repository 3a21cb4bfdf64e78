"""OOMObserver: when the CUDA allocator is about to raise out-of-memory,
write what memory looked like, rendered offline by memsight.

Files, in ``folder``, named from the ``filename`` prefix:

========================================  ==========================================
``{prefix}_snapshot.pickle``              the snapshot (torch's pickle; loads with
                                          ``pickle.load``, memsight, memory_viz)
``{prefix}_trace_plot.html``              the page, opening on the memory timeline
``{prefix}_segment_plot.html``            the page, opening on the allocator state
``{prefix}_segment_flamegraph.svg``       flamegraph of cached memory by segment
``{prefix}_memory_flamegraph.svg``        flamegraph of allocated memory
``{prefix}_oom_diagnosis.txt``            the plain-text OOM diagnosis
========================================  ==========================================

Each file is produced and written on its own: one that fails (logged) loses
none of the others. The OOM itself is never swallowed: torch raises
``torch.cuda.OutOfMemoryError`` as usual once the files are written.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..._engine import core
from ..capture import _native_dump, rank_dumps
from .._util.cuda import torch_module
from .._util.dist import dist_info
from ._files import FileCallback
from ..capture.phase_marks import mark_step
from ..capture.recording import Recording
from .state import TrainState
from ..capture.tags import add_tags

log = logging.getLogger("memsight")

# Output suffixes, in the order the files are written (Composer's five first).
SNAPSHOT = "_snapshot.pickle"
TRACE_PLOT = "_trace_plot.html"
SEGMENT_PLOT = "_segment_plot.html"
SEGMENT_FLAMEGRAPH = "_segment_flamegraph.svg"
MEMORY_FLAMEGRAPH = "_memory_flamegraph.svg"
DIAGNOSIS = "_oom_diagnosis.txt"
SUFFIXES = (SNAPSHOT, TRACE_PLOT, SEGMENT_PLOT, SEGMENT_FLAMEGRAPH, MEMORY_FLAMEGRAPH)


def list_filenames(prefix: str) -> list[str]:
    """The five visualisation files for ``prefix`` (without the diagnosis)."""
    return [prefix + s for s in SUFFIXES]


def _size(n: int) -> str:
    try:
        return core().format_bytes(float(n))
    except Exception:
        return f"{n} bytes"


def _device_memory(torch: Any, device: int, limit_or_total: int) -> tuple[int, int | None]:
    """(device total, allocator limit or None). torch's observer passes the
    allocator's limit when set_per_process_memory_fraction is in force, else
    the device's total memory; the device's properties tell which."""
    try:
        total = int(torch.cuda.get_device_properties(device).total_memory)
    except Exception:
        return int(limit_or_total), None
    return total, (int(limit_or_total) if 0 < limit_or_total < total else None)


# -- the one observer torch knows about ---------------------------------------------
# torch can attach OOM observers but never detach them; memsight attaches one
# dispatcher per process and keeps the armed OOMObservers in a list.
_armed: list[weakref.ref[OOMObserver]] = []
_armed_lock = threading.Lock()
_attached = False


def _dispatch(device: int, alloc: int, device_total: int, device_free: int) -> None:
    with _armed_lock:
        observers = [o for o in (r() for r in _armed) if o is not None]
    for obs in observers:
        try:
            obs._on_oom(int(device), int(alloc), int(device_total), int(device_free))
        except Exception:  # never let anything but the OOM out of the allocator
            log.exception("memsight: OOMObserver failed while handling an OOM")


def _arm(obs: OOMObserver) -> None:
    global _attached
    with _armed_lock:
        if not any(r() is obs for r in _armed):
            _armed.append(weakref.ref(obs))
        if _attached:
            return
        torch = torch_module()
        torch.cuda.init()  # attaching before CUDA is initialised crashed older torch
        torch._C._cuda_attach_out_of_memory_observer(_dispatch)
        _attached = True


def _disarm(obs: OOMObserver) -> None:
    with _armed_lock:
        _armed[:] = [r for r in _armed if r() is not None and r() is not obs]


def _leak_text(snapshot: Callable[[], Any]) -> str:
    """What ``memsight leaks`` says, when the dumped history shows a leak."""
    try:
        leaks = snapshot().leaks()
        if any(d.get("verdict") == "leak" for d in leaks["devices"]):
            return "\nMemory grew from step to step before the OOM (memsight leaks):\n" + leaks.text
    except Exception as e:
        log.debug("memsight: no leak check in the OOM diagnosis: %s: %s", type(e).__name__, e)
    return ""


class OOMObserver(FileCallback):
    """Writes the snapshot, two pages, two flamegraphs and a diagnosis when a
    CUDA OOM is about to be raised. Composer's parameters and defaults.

    Args:
        max_entries: allocator-history entries kept (ring buffer).
        folder: local folder template (``{run_name}``, ``{rank}``, ...).
        filename: file-name prefix template; time variables (``{batch}``, ...)
            are filled at the OOM.
        remote_file_name: remote *folder* each written file is uploaded into
            (``s3://bucket/...``, ``file:///...``, or a name relative to the
            default destination); None or '' for no uploads.
        overwrite: if False, a non-empty folder is refused at set-up; also
            passed to uploads.
        context, stacks: what stacks torch records (see ``record``).
        parallel: render the pages and flamegraphs in parallel threads.
        model, optimizer: tag their storages in the snapshot and mark their
            phases, so the diagnosis tells parameters, gradients, optimizer
            state and activations apart exactly (see ``record``).
        holders: name the Python objects that hold the live tensors in the
            snapshot (``memsight_holders``), so ``summary``, ``diff`` and
            ``leaks`` say who keeps the memory; None follows ``MEMSIGHT_HOLDERS`` (on
            unless it is 0). See ``record``.
        all_ranks: in a distributed job, every rank writes its snapshot of the
            moment too (``{tag}_{n}_rank{r}.pickle`` in its folder, through the
            job's torch.distributed store; see ``rank_dumps``), and the
            diagnosis compares this rank with them.
        ranks_timeout: the longest this rank waits for the others at an OOM.

    Armed by ``fit_start`` (or :meth:`arm`), disarmed by ``close``.
    """

    def __init__(
        self,
        max_entries: int = 100_000,
        folder: str = "{run_name}/torch_traces",
        filename: str = "rank{rank}_oom",
        remote_file_name: str | None = "{run_name}/oom_traces/rank{rank}_oom",
        overwrite: bool = False,
        *,
        context: str = "alloc",
        stacks: str = "python",
        parallel: bool = True,
        model: Any = None,
        optimizer: Any = None,
        holders: bool | None = None,
        all_ranks: bool = True,
        ranks_timeout: float = 30.0,
    ) -> None:
        super().__init__(folder, filename, remote_file_name, overwrite)
        self.all_ranks = all_ranks
        self.ranks_timeout = float(ranks_timeout)
        self._ranks: rank_dumps.RankDumps | None = None
        #: The coordinated round of the last OOM, when there was one.
        self.last_round: rank_dumps.DumpRound | None = None
        self.max_entries = int(max_entries)
        self._recording = Recording(max_entries, context, stacks, owner="OOMObserver", model=model,
                                    optimizer=optimizer, holders=holders)
        self.parallel = parallel
        self.armed = False
        #: Files written for the last OOM, and how long that took (seconds).
        self.last_files: list[str] = []
        self.last_duration: float | None = None
        #: Where that time went: snapshot, pickle, write_pickle, engine_load, render (seconds).
        self.last_timings: dict[str, float] = {}
        #: How the last snapshot was taken: "native" (memsight's dumper) or "torch" (_snapshot()).
        self.last_path: str | None = None
        self.oom_count = 0
        self._lock = threading.Lock()

    @property
    def filename_config(self) -> dict[str, str]:
        return dict(zip(("snapshot", "trace_plot", "segment_plot", "segment_flamegraph", "memory_flamegraph"), SUFFIXES))

    def arm(self, state: TrainState | None = None) -> OOMObserver:
        """Same as ``fit_start``: for use outside a training loop."""
        self.fit_start(state)
        return self

    def _on_fit_start(self, state: TrainState) -> None:
        if not self.enabled:
            return
        if not self._require_cuda(state, "it is turned off"):
            return
        self._set_up_folder(state)
        self._recording.start()
        _arm(self)
        self.armed = True
        if self.all_ranks and self._ranks is None and rank_dumps.default_store() is not None:
            w = rank_dumps.watch_ranks(self.folder_name, state=state, timeout=self.ranks_timeout)
            if w.coordinated:
                self._ranks = w
            else:
                rank_dumps.unwatch_ranks()

    def _on_batch_start(self, state: TrainState) -> None:
        # Each batch is a step of the history, so the diagnosis can tell a leak.
        # Marked before the poll, so a dump that the poll answers holds this step.
        if self.armed:
            mark_step(state.batch)
        self._poll_ranks()

    def _on_batch_end(self, state: TrainState) -> None:
        self._poll_ranks()

    def _poll_ranks(self) -> None:
        if self._ranks is not None:  # the step boundary's check for other ranks' OOMs
            self._ranks.poll()

    def _on_close(self) -> None:
        if self.armed:
            _disarm(self)
            self.armed = False
        if self._ranks is not None:
            self._ranks = None
            rank_dumps.unwatch_ranks()
        self._recording.stop()
        self._flush_uploads()

    # -- at the OOM -----------------------------------------------------------------
    def _on_oom(self, device: int, alloc: int, device_total: int, device_free: int) -> None:
        if not (self.enabled and self.armed):
            return
        with self._lock:
            self._write_all(device, alloc, device_total, device_free)

    def _write_all(self, device: int, alloc: int, device_total: int, device_free: int) -> None:
        t0 = time.perf_counter()
        timings: dict[str, float] = {}

        def lap(name: str, since: float) -> float:
            now = time.perf_counter()
            timings[name] = round(now - since, 4)
            return now

        torch = torch_module()
        state = self.state or TrainState()
        self.oom_count += 1
        total, limit = _device_memory(torch, device, device_total)
        folder = self.folder_name or "."
        prefix = os.path.join(folder, self._prefix(state))
        start = len(self.written)
        memory = [{"device": int(device), "total": total, "limit": limit}]
        extra: dict[str, Any] = {"memsight_device_memory": memory}
        # Every other rank starts dumping now, while this one does.
        rnd = self._announce_round(device, alloc, device_free)
        if rnd is not None:
            extra["memsight_rank"] = self._ranks.meta_for(rnd)  # type: ignore[union-attr]
        taken = self._write_snapshot(torch, device, prefix, extra, rnd, lap, t0)
        if taken is None:
            return
        msnap, t = taken
        header = self._diagnosis_header(device, alloc, total, device_free, limit)
        jobs = self._render_jobs(msnap, header, rnd)
        if self.parallel and msnap is not None:
            with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="memsight-oom") as pool:
                list(pool.map(lambda j: self._write(prefix + j[0], j[1], j[2]), jobs))
        else:
            for suffix, produce, what in jobs:
                self._write(prefix + suffix, produce, what)
        lap("render", t)
        # Keep the documented order whatever order the threads finished in.
        order = {s: i for i, s in enumerate((SNAPSHOT,) + tuple(j[0] for j in jobs))}
        new = sorted(self.written[start:], key=lambda p: next((order[s] for s in order if p.endswith(s)), 99))
        self.written[start:] = new
        self.last_files = new
        self.last_duration = time.perf_counter() - t0
        self.last_timings = timings
        log.error(
            "memsight: CUDA out of memory on device %d (%s requested, %s free): wrote %d file(s) to %s in %.2fs",
            device, _size(alloc), _size(device_free), len(new), folder, self.last_duration,
        )
        for path in new:
            self._upload(path, state)

    def _write_snapshot(self, torch: Any, device: int, prefix: str, extra: dict[str, Any],
                        rnd: rank_dumps.DumpRound | None, lap: Callable[[str, float], float],
                        t0: float) -> tuple[Any, float] | None:
        """Takes the snapshot, writes it as the OOM pickle and answers the round
        with it. Returns the engine's model of it (None when the engine could not
        read it) and the time of the last lap; None when there is nothing to
        write (no history, or no snapshot at all)."""
        # The native path: the allocator's snapshot straight into the engine's model,
        # no Python object per entry (see _native_dump); torch's path when not ready.
        msnap: Any = _native_dump.take(extra)
        self.last_path = "native" if msnap is not None else "torch"
        if msnap is None:
            return self._write_torch_snapshot(torch, device, prefix, extra, rnd, lap, t0)
        t = lap("snapshot", t0)
        if msnap.trace_entry_count == 0:
            self._warn_no_history(device)
            return None
        self._write(prefix + SNAPSHOT, msnap.pickle, "OOM snapshot")
        self._answer_round(rnd, prefix + SNAPSHOT)
        return msnap, lap("write_pickle", t)

    def _write_torch_snapshot(self, torch: Any, device: int, prefix: str, extra: dict[str, Any],
                              rnd: rank_dumps.DumpRound | None, lap: Callable[[str, float], float],
                              t0: float) -> tuple[Any, float] | None:
        """_write_snapshot through torch's ``_snapshot()``, pickled here and read
        back by the engine."""
        try:
            snap = add_tags(torch.cuda.memory._snapshot())
            t = lap("snapshot", t0)
        except Exception:
            log.exception("memsight: OOM on device %d, but the memory snapshot could not be taken", device)
            return None
        try:  # beside torch's keys: the engine reads them to name a cap or other processes
            snap.update(extra)
        except Exception:
            log.debug("memsight: could not note the device's memory in the snapshot", exc_info=True)
        if not any(snap.get("device_traces") or []):
            self._warn_no_history(device)
            return None
        raw: bytes | None = None
        try:
            raw = pickle.dumps(snap, protocol=4)
        except Exception:
            log.exception("memsight: could not pickle the OOM snapshot")
        t = lap("pickle", t)
        if raw is not None:
            pickled = raw  # a name the closure sees as bytes
            self._write(prefix + SNAPSHOT, lambda: pickled, "OOM snapshot")
            self._answer_round(rnd, prefix + SNAPSHOT)
        t = lap("write_pickle", t)
        del snap
        msnap: Any = None
        if raw is not None:
            try:
                from ...snapshot import loads

                msnap = loads(raw)
            except Exception as e:
                log.error("memsight: the engine could not read the OOM snapshot: %s: %s", type(e).__name__, e)
        return msnap, lap("engine_load", t)

    def _render_jobs(self, msnap: Any, header: str,
                     rnd: rank_dumps.DumpRound | None) -> list[tuple[str, Callable[[], str], str]]:
        """The files drawn from the engine's model, as (suffix, produce, what);
        each says why when there is no model."""

        def need() -> Any:
            if msnap is None:
                raise RuntimeError("no snapshot for the engine (see the error above)")
            return msnap

        def diagnosis() -> str:
            try:
                body = need().summary_text()
            except Exception as e:
                body = f"(the engine's diagnosis is unavailable: {type(e).__name__}: {e})\n"
            return header + "\n" + body + _leak_text(need) + self._other_ranks(rnd)

        return [
            (TRACE_PLOT, lambda: need().html("trace_plot"), "trace plot page"),
            (SEGMENT_PLOT, lambda: need().html("segment_plot"), "segment plot page"),
            (SEGMENT_FLAMEGRAPH, lambda: need().svg("segments"), "segment flamegraph"),
            (MEMORY_FLAMEGRAPH, lambda: need().svg("memory"), "memory flamegraph"),
            (DIAGNOSIS, diagnosis, "OOM diagnosis"),
        ]

    # -- the other ranks ----------------------------------------------------------
    def _announce_round(self, device: int, alloc: int, device_free: int) -> rank_dumps.DumpRound | None:
        if self._ranks is None:
            return None
        reason = (f"CUDA out of memory on rank {self._ranks.rank}, device {device}: "
                  f"{_size(alloc)} requested, {_size(device_free)} free")
        try:
            rnd = self._ranks.announce("oom", reason, join_within=self.ranks_timeout)
        except Exception:
            log.exception("memsight: could not ask the other ranks for their snapshots")
            return None
        self.last_round = rnd
        return rnd

    def _answer_round(self, rnd: rank_dumps.DumpRound | None, written: str) -> None:
        if rnd is not None and self._ranks is not None and written in self.written:
            self._ranks.answer_own(rnd, written)

    def _other_ranks(self, rnd: rank_dumps.DumpRound | None) -> str:
        """The other ranks' state at this moment, from their dumps of the round:
        waits for them (at most ranks_timeout; torchrun ends every rank once
        this one raises), then `memsight ranks` over the files here."""
        if rnd is None or self._ranks is None:
            return ""
        try:
            self._ranks.finish(rnd, self.ranks_timeout)
            here = rnd.local_files()
            out = (f"\nEvery rank at this moment (dump round {rnd.seq}: {len(rnd.files)} of "
                   f"{rnd.world_size} ranks wrote a snapshot, {len(here)} of them here"
                   + (f"; manifest {rnd.manifest}" if rnd.manifest else "") + ")\n")
            for r, why in sorted(rnd.missing.items()):
                out += f"  rank {r}: no snapshot ({why})\n"
            if len(here) > 1:
                from ...ranks import ranks

                out += "\n" + ranks(here).text
            return out
        except Exception as e:
            log.exception("memsight: could not compare this rank with the others")
            return f"\n(the other ranks' state is unavailable: {type(e).__name__}: {e})\n"

    def _warn_no_history(self, device: int) -> None:
        log.warning(
            "memsight: OOM on device %d, but no allocation history was recorded "
            "(was recording turned off outside memsight?); no files written", device,
        )

    def _diagnosis_header(self, device: int, alloc: int, device_total: int, device_free: int,
                          limit: int | None = None) -> str:
        info = dist_info()
        st = self.state
        where = f"rank {info.get('rank', 0)} of {info.get('world_size', 1)}, device {device}"
        when = f"epoch {st.epoch}, batch {st.batch}" if st is not None else "outside a training loop"
        return (
            f"CUDA out of memory ({where}; {when}; run {st.run_name if st else '-'})\n"
            f"  requested {_size(alloc)}; the device had {_size(device_free)} free "
            f"of {_size(device_total)}"
            + (f"; the allocator's limit is {_size(limit)} (set_per_process_memory_fraction)" if limit else "")
            + "\n"
        )
