"""MemorySnapshot: record the allocator history over one window of batches
and write it out (``{prefix}.pickle`` and the page ``{prefix}.html``).

Unlike Composer's, ending the window releases only this callback's recording
request: an armed OOMObserver (or a ``record()`` block) keeps recording.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
from typing import Any

from ..capture import _native_dump
from .._util.cuda import torch_module
from ._files import FileCallback
from ..capture.recording import Recording
from .state import TrainState
from ..capture.tags import add_tags

log = logging.getLogger("memsight")

_INTERVAL = re.compile(r"^\s*(\d+)\s*(ba|batch|batches)?\s*$", re.IGNORECASE)


def parse_batches(interval: int | str) -> int:
    """``3``, ``'3'`` or ``'3ba'`` → 3 batches."""
    if isinstance(interval, bool):
        raise ValueError(f"interval must be a number of batches, not {interval!r}")
    if isinstance(interval, int):
        n = interval
    else:
        m = _INTERVAL.match(str(interval))
        if not m:
            raise ValueError(
                f"interval {interval!r} is not a number of batches: use an int or a string like '3ba'"
            )
        n = int(m.group(1))
    if n < 1:
        raise ValueError(f"interval must be at least one batch, not {interval!r}")
    return n


class MemorySnapshot(FileCallback):
    """Records batches ``skip_batches+1 .. skip_batches+interval`` and writes
    the snapshot at the end of that window, once per run. Composer's
    parameters and defaults; ``{batch}`` in the names is the batch that
    closed the window. If the fit ends inside the window, what was recorded
    so far is written at ``fit_end``. ``model=`` / ``optimizer=``: their
    storages are tagged and their phases marked (see ``record``).
    ``holders=``: name who holds the live tensors in the snapshot (see
    ``record``; None follows ``MEMSIGHT_HOLDERS``, on unless it is 0).
    """

    def __init__(
        self,
        skip_batches: int = 1,
        interval: int | str = "3ba",
        max_entries: int = 100_000,
        folder: str = "{run_name}/torch_traces",
        filename: str = "rank{rank}.{batch}.memory_snapshot",
        remote_file_name: str | None = "{run_name}/torch_memory_traces",
        overwrite: bool = False,
        *,
        context: str = "all",
        stacks: str = "python",
        model: Any = None,
        optimizer: Any = None,
        holders: bool | None = None,
    ) -> None:
        super().__init__(folder, filename, remote_file_name, overwrite)
        if int(skip_batches) < 0:
            raise ValueError(f"skip_batches must be >= 0, not {skip_batches!r}")
        self.skip_batches = int(skip_batches)
        self.interval = parse_batches(interval)
        self.max_entries = int(max_entries)
        self._recording = Recording(max_entries, context, stacks, owner="MemorySnapshot", model=model,
                                    optimizer=optimizer, holders=holders)
        self._seen = 0  # batches ended since fit_start
        self._start_batch: int | None = None
        self.done = False

    @property
    def recording(self) -> bool:
        return self._recording.active

    def _on_fit_start(self, state: TrainState) -> None:
        if not self.enabled:
            return
        if not self._require_cuda(state, "it is turned off"):
            return
        self._set_up_folder(state)
        self._seen = 0

    def _on_batch_start(self, state: TrainState) -> None:
        if self.done or self._recording.active or self.folder_name is None:
            return
        if self._seen >= self.skip_batches:
            self._recording.start()
            self._start_batch = state.batch

    def _on_batch_end(self, state: TrainState) -> None:
        self._seen += 1
        if self._recording.active and self._start_batch is not None:
            if state.batch >= self._start_batch + self.interval:
                self._finish(state)

    def _on_fit_end(self, state: TrainState) -> None:
        if self._recording.active:
            log.info("memsight: the fit ended inside MemorySnapshot's window; writing what was recorded")
            self._finish(state)

    def _on_close(self) -> None:
        self._recording.stop()
        self._flush_uploads()

    def _finish(self, state: TrainState) -> None:
        try:
            self.export(state)
        finally:
            self._recording.stop()
            self.done = True

    def export(self, state: TrainState | None = None) -> list[str]:
        """Writes ``{prefix}.pickle`` and ``{prefix}.html`` now; returns the paths written."""
        state = state or self.state or TrainState()
        try:
            # Natively, when the dumper is ready: no Python object per entry.
            msnap = _native_dump.take()
            if msnap is not None:
                raw = msnap.pickle()
            else:
                snap = add_tags(torch_module().cuda.memory._snapshot())
                raw = pickle.dumps(snap, protocol=4)
                del snap
        except Exception:
            log.exception("memsight: MemorySnapshot could not take the snapshot")
            return []
        prefix = os.path.join(self.folder_name or ".", self._prefix(state))
        start = len(self.written)
        self._write(prefix + ".pickle", lambda: raw, "memory snapshot")

        def page() -> str:
            from ...snapshot import loads

            return (msnap or loads(raw)).html("trace_plot")

        self._write(prefix + ".html", page, "memory snapshot page")
        files = self.written[start:]
        for path in files:
            self._upload(path, state)
        log.info("memsight: MemorySnapshot wrote %s", ", ".join(files) or "nothing")
        return files

    def __repr__(self) -> str:
        return f"MemorySnapshot(skip_batches={self.skip_batches}, interval={self.interval}ba)"
