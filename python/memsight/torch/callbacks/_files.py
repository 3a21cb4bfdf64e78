"""What OOMObserver and MemorySnapshot share: a folder, a file-name prefix,
an optional remote folder, each written file rendered and uploaded on its own."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from .callback import Callback
from .._util.atomic import write_atomic
from .state import TrainState
from .templates import ensure_folder_is_empty, format_name_with_dist, format_name_with_dist_and_time
from .uploads import check_remote, remote_uri, shared_uploader

log = logging.getLogger("memsight")


class FileCallback(Callback):
    def __init__(self, folder: str, filename: str, remote_file_name: str | None, overwrite: bool) -> None:
        super().__init__()
        self.folder = folder
        self.filename = filename
        self.remote_file_name = remote_file_name or None  # '' turns uploads off too
        self.overwrite = bool(overwrite)
        check_remote(self.remote_file_name)
        self.folder_name: str | None = None  # the rendered folder, once set up
        self.state: TrainState | None = None
        #: Every file written so far, in order.
        self.written: list[str] = []
        self._warned_no_destination = False

    def attach_model(self, model: Any, optimizer: Any = None) -> None:
        """For drivers that know the model (the Lightning adapters): hands
        over the model and the optimizer, each unless the callback has one."""
        rec = getattr(self, "_recording", None)
        if rec is not None:
            rec.hand_over(model if rec.model is None else None, optimizer if rec.optimizer is None else None)

    def _set_up_folder(self, state: TrainState) -> None:
        """Renders the folder and, unless overwrite, refuses a non-empty one.
        Once per instance: a second fit (or a re-arm after close) writes on."""
        self.state = state
        if self.folder_name is not None:
            return
        folder = format_name_with_dist(self.folder, state.ensure_run_name())
        if not self.overwrite:
            ensure_folder_is_empty(folder)
        os.makedirs(folder, exist_ok=True)
        self.folder_name = folder

    def _prefix(self, state: TrainState) -> str:
        return format_name_with_dist_and_time(self.filename, state.ensure_run_name(), state)

    def _write(self, path: str, produce: Callable[[], bytes | str], what: str) -> bool:
        """Writes one file from ``produce()``; logs and returns False on failure."""
        try:
            data = produce()
            write_atomic(path, data.encode("utf-8") if isinstance(data, str) else data)
        except Exception as e:
            log.error("memsight: could not write the %s (%s): %s: %s", what, path, type(e).__name__, e)
            return False
        self.written.append(path)
        return True

    def _upload(self, path: str, state: TrainState) -> None:
        if not self.remote_file_name:
            return
        try:
            folder = format_name_with_dist_and_time(self.remote_file_name, state.ensure_run_name(), state)
            uri = remote_uri(folder, os.path.basename(path))
            if uri is None:
                if not self._warned_no_destination:
                    self._warned_no_destination = True
                    log.info(
                        "memsight: remote_file_name %r has no scheme and no default destination is set "
                        "(memsight.torch.set_default_destination or $MEMSIGHT_UPLOAD_URI): files stay local",
                        self.remote_file_name,
                    )
                return
            shared_uploader().upload(path, uri, overwrite=self.overwrite)
        except Exception:
            log.exception("memsight: could not queue %s for upload", path)

    def _flush_uploads(self) -> None:
        if self.remote_file_name:
            shared_uploader().flush(float(os.environ.get("MEMSIGHT_UPLOAD_CLOSE_TIMEOUT", "300")))
