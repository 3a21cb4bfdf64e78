"""Background uploads of the files memsight writes.

Destinations: ``file://`` paths, ``s3://bucket/key`` (through boto3, with
``$S3_ENDPOINT_URL`` / ``$AWS_ENDPOINT_URL`` for S3-compatible servers), and
any other scheme fsspec knows, when fsspec is installed. A remote name with
no scheme is relative to the default destination
(:func:`set_default_destination` or ``$MEMSIGHT_UPLOAD_URI``); with neither,
it is not uploaded, as a Composer remote name with no logger destination.

Uploads run in one background thread, with retries and exponential back-off;
they never block or fail training (failures are logged to the ``memsight``
logger). Each file is staged first (a hard link, or a copy), so the caller
may replace or delete it at once. :func:`flush` waits for the queue; it runs
at interpreter exit too (``$MEMSIGHT_UPLOAD_EXIT_TIMEOUT`` seconds, default
300), so the files of a job that dies of OOM still reach their destination.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from .._util.atomic import write_atomic
from .templates import parse_uri

log = logging.getLogger("memsight")

_default_destination: str | None = None


def set_default_destination(uri: str | None) -> None:
    """Where remote names without a scheme go, e.g. ``s3://bucket/prefix``."""
    global _default_destination
    _default_destination = uri


def default_destination() -> str | None:
    return _default_destination or os.environ.get("MEMSIGHT_UPLOAD_URI") or None


def _fsspec_backend_error(scheme: str) -> str | None:
    """None when fsspec can write to ``scheme``; else why not."""
    try:
        import fsspec  # type: ignore[import-not-found]
    except ImportError:
        return "fsspec is not installed"
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        return "fsspec does not know it"
    except ImportError as e:
        return f"fsspec needs another package for it: {e}"
    return None


def check_remote(remote: str | None) -> None:
    """Raises ValueError for a remote name no backend can take (at set-up,
    so that a typo fails before training rather than after an OOM)."""
    if not remote:
        return
    scheme, bucket, _ = parse_uri(remote)
    if scheme in ("", "file"):
        return
    if scheme == "s3":
        if not bucket:
            raise ValueError(f"remote name {remote!r} has no bucket (expected s3://bucket/path)")
        try:
            import boto3  # noqa: F401  # type: ignore[import-not-found]
        except ImportError as e:
            raise ValueError(
                f"remote name {remote!r} needs boto3 for s3:// uploads: install boto3"
            ) from e
        return
    why = _fsspec_backend_error(scheme)
    if why is None:
        return
    raise ValueError(
        f"remote name {remote!r}: no uploader for scheme {scheme!r} ({why}; memsight uploads to "
        "file:// and s3://, and to other schemes through fsspec when it is installed)"
    )


def remote_uri(remote_folder: str, basename: str) -> str | None:
    """The URI a file named ``basename`` goes to under ``remote_folder``
    (already rendered), or None when there is nowhere to upload it."""
    scheme, _, _ = parse_uri(remote_folder)
    if scheme:
        return remote_folder.rstrip("/") + "/" + basename
    name = (remote_folder.rstrip("/") + "/" + basename).lstrip("/")
    dest = default_destination()
    if not dest:
        return None
    return dest.rstrip("/") + "/" + name


# -- backends --------------------------------------------------------------------

_local = threading.local()


def _s3_client() -> Any:
    endpoint = os.environ.get("S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = os.environ.get("S3_REGION_NAME") or os.environ.get("AWS_DEFAULT_REGION") or None
    clients = getattr(_local, "s3", None)
    if clients is None:
        clients = _local.s3 = {}
    client = clients.get((endpoint, region))
    if client is None:
        import boto3  # type: ignore[import-not-found]
        from botocore.config import Config  # type: ignore[import-not-found]

        client = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name=region,
            config=Config(retries={"max_attempts": 1}, connect_timeout=10, read_timeout=60),
        )
        clients[(endpoint, region)] = client
    return client


def _upload_s3(local: str, bucket: str, key: str, overwrite: bool) -> None:
    client = _s3_client()
    if not overwrite:
        from botocore.exceptions import ClientError  # type: ignore[import-not-found]

        try:
            client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code not in ("404", "NoSuchKey", "NotFound"):
                raise
        else:
            raise FileExistsError(f"s3://{bucket}/{key} exists and overwrite=False")
    client.upload_file(local, bucket, key)


def _upload_file_scheme(local: str, dest: str, overwrite: bool) -> None:
    if os.path.exists(dest) and not overwrite:
        raise FileExistsError(f"{dest} exists and overwrite=False")
    with open(local, "rb") as f:
        write_atomic(dest, f.read())


def _upload_fsspec(local: str, uri: str, overwrite: bool) -> None:
    import fsspec  # type: ignore[import-not-found]

    fs, path = fsspec.core.url_to_fs(uri)
    if not overwrite and fs.exists(path):
        raise FileExistsError(f"{uri} exists and overwrite=False")
    parent = path.rsplit("/", 1)[0]
    if parent and parent != path:
        try:
            fs.makedirs(parent, exist_ok=True)
        except Exception:
            pass  # object stores have no folders
    fs.put_file(local, path)


def upload_now(local: str, uri: str, overwrite: bool = False) -> None:
    """Uploads one file synchronously (one attempt)."""
    scheme, bucket, path = parse_uri(uri)
    if scheme == "file":
        _upload_file_scheme(local, path, overwrite)
    elif scheme == "s3":
        _upload_s3(local, bucket, path, overwrite)
    elif scheme == "":
        _upload_file_scheme(local, uri, overwrite)
    else:
        _upload_fsspec(local, uri, overwrite)


# -- the queue -------------------------------------------------------------------


@dataclass
class UploadResult:
    local_path: str
    uri: str
    ok: bool
    attempts: int
    error: str = ""


class Uploader:
    """A background thread that uploads staged files, with retries."""

    def __init__(self, num_attempts: int = 3, backoff: float = 1.0, max_backoff: float = 30.0) -> None:
        if num_attempts < 1:
            raise ValueError("num_attempts must be at least 1")
        self.num_attempts = num_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.results: list[UploadResult] = []
        self._queue: queue.Queue[tuple[str, str, str, bool] | None] = queue.Queue()
        self._staging = ""  # made on first use, removed by close() and at exit
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self._closed = False

    def _stage(self, local: str) -> str:
        with self._lock:
            if not self._staging:
                self._staging = tempfile.mkdtemp(prefix="memsight-uploads-")
        fd, staged = tempfile.mkstemp(prefix="f-", suffix="-" + os.path.basename(local), dir=self._staging)
        os.close(fd)
        os.unlink(staged)
        try:
            os.link(local, staged)  # free, and safe: memsight replaces files by rename
        except OSError:
            shutil.copyfile(local, staged)
        return staged

    def upload(self, local_path: str, uri: str, overwrite: bool = False) -> bool:
        """Queues ``local_path`` for ``uri``; returns at once. False if it
        could not even be queued (the reason is logged)."""
        try:
            staged = self._stage(local_path)
        except Exception as e:
            log.error("memsight: cannot stage %s for upload to %s: %s", local_path, uri, e)
            with self._lock:
                self.results.append(UploadResult(local_path, uri, False, 0, f"staging failed: {e}"))
            return False
        with self._lock:
            if self._closed:
                log.error("memsight: uploader is closed; %s is not uploaded", local_path)
                return False
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memsight-uploader", daemon=True)
                self._thread.start()
        self._queue.put((local_path, staged, uri, overwrite))
        return True

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            local, staged, uri, overwrite = item
            result = self._upload_with_retries(local, staged, uri, overwrite)
            try:
                os.unlink(staged)
            except OSError:
                pass
            with self._lock:
                self.results.append(result)
                self._pending -= 1
                if self._pending == 0:
                    self._idle.notify_all()

    def _upload_with_retries(self, local: str, staged: str, uri: str, overwrite: bool) -> UploadResult:
        delay = self.backoff
        for attempt in range(1, self.num_attempts + 1):
            try:
                upload_now(staged, uri, overwrite)
                log.info("memsight: uploaded %s to %s", local, uri)
                return UploadResult(local, uri, True, attempt)
            except FileExistsError as e:  # not transient: retrying cannot help
                log.error("memsight: not uploading %s: %s", local, e)
                return UploadResult(local, uri, False, attempt, str(e))
            except Exception as e:
                if attempt == self.num_attempts:
                    log.error("memsight: upload of %s to %s failed after %d attempts: %s", local, uri, attempt, e)
                    return UploadResult(local, uri, False, attempt, f"{type(e).__name__}: {e}")
                log.warning(
                    "memsight: upload of %s to %s failed (attempt %d of %d, retrying in %.1fs): %s",
                    local, uri, attempt, self.num_attempts, delay, e,
                )
                time.sleep(delay)
                delay = min(delay * 2, self.max_backoff)
        raise AssertionError("unreachable")

    def pending(self) -> int:
        with self._lock:
            return self._pending

    def flush(self, timeout: float | None = None) -> bool:
        """Waits until every queued upload finished; False on time-out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float | None = None) -> bool:
        done = self.flush(timeout)
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            if done:
                thread.join(timeout=5)
        if self._staging:
            shutil.rmtree(self._staging, ignore_errors=True)
        return done


_shared: Uploader | None = None
_shared_lock = threading.Lock()


def shared_uploader() -> Uploader:
    """The process's uploader (created on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared._closed:
            _shared = Uploader(num_attempts=int(os.environ.get("MEMSIGHT_UPLOAD_ATTEMPTS", "3")))
        return _shared


def flush(timeout: float | None = None) -> bool:
    """Waits for the shared uploader's queue; True when it drained."""
    with _shared_lock:
        up = _shared
    return True if up is None else up.flush(timeout)


@atexit.register
def _flush_at_exit() -> None:
    with _shared_lock:
        up = _shared
    if up is None:
        return
    timeout = float(os.environ.get("MEMSIGHT_UPLOAD_EXIT_TIMEOUT", "300"))
    if up.pending():
        log.info("memsight: waiting up to %.0fs for %d upload(s) before exit", timeout, up.pending())
    if not up.close(timeout):  # close() also removes the staging folder
        log.error("memsight: %d upload(s) did not finish before exit", up.pending())
