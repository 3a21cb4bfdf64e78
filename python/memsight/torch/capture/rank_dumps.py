"""Every rank's snapshot of the same moment, through the job's own store.

When one rank of a distributed job runs out of memory (OOMObserver), or
when code asks for it (:func:`dump_all_ranks`), every rank writes its
allocator snapshot, and ``memsight ranks`` puts them side by side. The ranks
agree through the key-value store torch.distributed already runs for the
job (the TCPStore torchrun starts; ``_get_default_store()`` or one passed in),
never through a channel of memsight's own and never through a collective:
the rank that fails is in no state to join one, and the others are often
blocked in one, waiting for it.

The protocol, under ``memsight/dumps/`` in the store::

    seq                 counter: the job-wide number of the last round asked for
    <n>/request         JSON {tag, reason, origin_rank, time}: what round n is
    <n>/rank<r>         JSON {rank, file, host, pid, seconds, bytes} or {rank, error}
    <n>/done            counter: the ranks that have answered round n

The asking rank takes the next number (``add(seq, 1)``), describes the round,
writes its own snapshot and waits, at most ``timeout`` seconds, for
``done`` to reach the world size; then it writes the round's manifest
(``{tag}_{n}_manifest.json``: who wrote what, who did not answer). Every
other rank notices the new number at its next check: a background thread
checks once a ``interval`` (one ``add(seq, 0)``: a single round trip that
never blocks), and the training callbacks check at step boundaries, both
rate-limited together; it then writes ``{tag}_{n}_rank{r}.pickle`` and
answers. A dead or hung rank only makes the asking rank wait until its
timeout, and every store call the asking rank makes on its own thread is
bounded too: a store that stops answering costs at most ``timeout``.

torch's NCCL process group coordinates its flight-recorder dumps the same
way (a monitor thread checking a store key once a second); memsight's
default interval is that second too.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import sys
import threading
import time
from datetime import timedelta
from typing import Any, Callable

from .._util.dist import dist_info
from .dump_round import FILE_NAME, DumpRound, _link_or_copy, _safe_tag, write_manifest

log = logging.getLogger("memsight")

PREFIX = "memsight/dumps/"
# The value no real key holds: compare_set(key, ABSENT, ABSENT) reads a key
# without waiting for it (the reply is ABSENT when it is not set).
_ABSENT = "\x00memsight-absent\x00"
# (rank, round) this process asked for, and answered: its watcher leaves
# them be, and no rank answers a round twice.
_own_rounds: set[tuple[int, int]] = set()
_answered_rounds: set[tuple[int, int]] = set()
_own_lock = threading.Lock()
_local_rounds = itertools.count(1)  # rounds of a process without a store


def default_store() -> Any | None:
    """The job's store: the default process group's, once torch.distributed is
    initialised; None otherwise (a single process, or no process group yet)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        return dist.distributed_c10d._get_default_store()
    except Exception as e:
        log.debug("memsight: no default store: %s", e)
        return None


def _bounded(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """fn() on a helper thread, waited for at most ``timeout`` seconds: a store
    whose server stopped answering never holds the caller longer."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, name="memsight-store", daemon=True)
    t.start()
    t.join(max(0.0, timeout))
    if t.is_alive():
        raise TimeoutError(f"{what}: the store did not answer within {timeout:.1f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _device_info() -> dict[str, Any]:
    """torch's version and the current CUDA device, as far as torch tells."""
    out: dict[str, Any] = {}
    torch = sys.modules.get("torch")
    if torch is None:
        return out
    out["torch"] = str(getattr(torch, "__version__", ""))
    try:
        if torch.cuda.is_available():
            d = int(torch.cuda.current_device())
            props = torch.cuda.get_device_properties(d)
            out.update(device=d, device_name=str(props.name), device_total=int(props.total_memory))
    except Exception:
        pass
    return out


class RankDumps:
    """This rank's part in coordinated dumps: answers other ranks' rounds
    (a watcher thread and :meth:`poll`) and asks for rounds (:meth:`request`).

    Args:
        folder: where this rank writes its snapshots (and, asking, the manifest).
        store: the job's store; default: the default process group's.
        rank, world_size: default: the process group's (``dist_info()``).
        interval: seconds between two checks of the store, thread and
            step boundaries together.
        timeout: the longest the asking rank waits for the others.
        snapshot: ``snapshot(extra) -> data`` for :func:`recording.dump`
            (a memsight Snapshot or a dict); default: the allocator's now.
        state: a TrainState whose batch number goes into each snapshot.
        thread: check from a background thread (default), which also answers
            while the training thread is blocked (in a collective waiting for
            the failed rank, say); False: only at :meth:`poll` (step boundaries).
    """

    def __init__(self, folder: str = ".", *, store: Any = None, rank: int | None = None,
                 world_size: int | None = None, interval: float = 1.0, timeout: float = 30.0,
                 snapshot: Callable[[dict[str, Any]], Any] | None = None, state: Any = None,
                 thread: bool = True) -> None:
        info = dist_info()
        self.folder = folder
        self.store = store if store is not None else default_store()
        self.rank = int(info.get("rank", 0) if rank is None else rank)
        self.world_size = int(info.get("world_size", 1) if world_size is None else world_size)
        self.local_rank = info.get("local_rank")
        self.interval = float(interval)
        self.timeout = float(timeout)
        self.state = state
        self._snapshot = snapshot
        self._seen = 0  # the last round looked at
        self._started = False
        self.thread = bool(thread)
        self._last_check = float("-inf")
        self._check_lock = threading.Lock()
        self._dump_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = 0
        #: Rounds this rank answered or asked for, newest last.
        self.rounds: list[DumpRound] = []

    @property
    def coordinated(self) -> bool:
        """Whether there is a store to agree through."""
        return self.store is not None

    # -- store access -----------------------------------------------------------
    def _add(self, key: str, amount: int) -> int:
        return int(self.store.add(PREFIX + key, amount))

    def _try_get(self, key: str) -> str | None:
        value = self.store.compare_set(PREFIX + key, _ABSENT, _ABSENT)
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        return None if text == _ABSENT else text

    def _set(self, key: str, value: dict[str, Any]) -> None:
        self.store.set(PREFIX + key, json.dumps(value))

    def _request_of(self, n: int, wait: float) -> str | None:
        """Round n's request; a rank that numbered the round and has not yet
        written what it asks for is given up to `wait` seconds."""
        raw = self._try_get(f"{n}/request")
        if raw is None:
            try:
                self.store.wait([PREFIX + f"{n}/request"], timedelta(seconds=wait))
            except Exception:  # the store's timeout: the asking rank died between its calls
                return None
            raw = self._try_get(f"{n}/request")
        return raw

    # -- watching -----------------------------------------------------------------
    def start(self) -> RankDumps:
        """Starts answering: from now on, rounds other ranks ask for are dumped
        here (rounds asked for before are not)."""
        if not self.coordinated or self._started:
            return self
        try:
            self._seen = _bounded(lambda: self._add("seq", 0), self.timeout, "reading the dump round")
        except Exception as e:
            log.warning("memsight: coordinated dumps are off on rank %d: %s", self.rank, e)
            self.store = None
            return self
        self._started = True
        self._stop.clear()
        if self.thread:
            self._thread = threading.Thread(target=self._watch, name="memsight-rank-dumps", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._started = False
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=2 * self.interval + 1)

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self, force: bool = False) -> list[DumpRound]:
        """The cheap check: whether another rank asked for a round since the
        last one; if so, dumps for it. At most once per ``interval`` (thread and
        callers together), never waits for another check in progress, never
        raises. Returns the rounds answered."""
        if not self.coordinated or not self._started:
            return []
        now = time.monotonic()
        if not force and now - self._last_check < 0.9 * self.interval:  # 0.9: the thread's jitter
            return []
        if not self._check_lock.acquire(blocking=False):
            return []
        try:
            self._last_check = now
            return self._answer_new_rounds()
        except Exception as e:
            self._failures += 1
            if self._failures in (1, 10, 100):
                log.warning("memsight: checking the store for dump requests failed (%d times): %s",
                            self._failures, e)
            return []
        finally:
            self._check_lock.release()

    def _answer_new_rounds(self) -> list[DumpRound]:
        if not self.coordinated:
            return []
        latest = self._add("seq", 0)
        done = []
        while self._seen < latest:
            self._seen += 1
            n = self._seen
            with _own_lock:
                if (self.rank, n) in _own_rounds:
                    continue
            raw = self._request_of(n, 2.0)
            req = json.loads(raw) if raw else {"tag": "dump", "origin_rank": -1}
            rnd = DumpRound(n, _safe_tag(req.get("tag", "dump")), str(req.get("reason", "")),
                            int(req.get("origin_rank", -1)), self.world_size)
            self._dump_for(rnd)
            done.append(rnd)
        return done

    # -- dumping ------------------------------------------------------------------
    def _meta(self, rnd: DumpRound) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "rank": self.rank, "world_size": self.world_size, "seq": rnd.seq, "tag": rnd.tag,
            "reason": rnd.reason, "origin_rank": rnd.origin_rank, "host": socket.gethostname(),
            "pid": os.getpid(), "time": time.time(),
        }
        if self.local_rank is not None:
            meta["local_rank"] = int(self.local_rank)
        batch = getattr(self.state, "batch", None)
        if isinstance(batch, int):
            meta["batch"] = batch
        meta.update(_device_info())
        return meta

    def path_for(self, rnd: DumpRound) -> str:
        return os.path.join(self.folder, FILE_NAME.format(tag=rnd.tag, seq=rnd.seq, rank=self.rank))

    def _dump_for(self, rnd: DumpRound, written: str | None = None) -> None:
        """Writes this rank's snapshot for the round (or takes `written`, a file
        with it already) and answers in the store; logs, never raises."""
        from . import recording

        t0 = time.perf_counter()
        answer: dict[str, Any] = {"rank": self.rank, "host": socket.gethostname(), "pid": os.getpid()}
        path = self.path_for(rnd)
        # A rank answers a round once. Its watcher may have answered one that
        # the rank then joins with its OOM snapshot: that file replaces the dump.
        with _own_lock:
            answered = (self.rank, rnd.seq) in _answered_rounds
            if answered and written is None:
                return
            _answered_rounds.add((self.rank, rnd.seq))
        try:
            with self._dump_lock:
                if written is not None:
                    _link_or_copy(written, path)
                else:
                    extra = {"memsight_rank": self._meta(rnd)}
                    data = self._snapshot(extra) if self._snapshot is not None else None
                    recording.dump(path, data, extra=extra)
            answer.update(file=os.path.abspath(path), bytes=os.path.getsize(path))
            rnd.files[self.rank] = os.path.abspath(path)
        except Exception as e:
            log.exception("memsight: rank %d could not write its snapshot for dump round %d", self.rank, rnd.seq)
            answer["error"] = f"{type(e).__name__}: {e}"
            rnd.missing[self.rank] = answer["error"]
        answer["seconds"] = round(time.perf_counter() - t0, 4)
        self.rounds.append(rnd)
        if self.coordinated and not answered:
            def answer_round() -> None:
                self._set(f"{rnd.seq}/rank{self.rank}", answer)
                self._add(f"{rnd.seq}/done", 1)

            try:
                _bounded(answer_round, self.timeout, "answering a dump round")
            except Exception as e:
                log.warning("memsight: rank %d could not answer dump round %d: %s", self.rank, rnd.seq, e)
        if "error" not in answer:
            log.info("memsight: rank %d wrote %s for dump round %d (%s) in %.2f s", self.rank, path, rnd.seq,
                     rnd.tag, answer["seconds"])

    # -- asking -------------------------------------------------------------------
    def announce(self, tag: str = "manual", reason: str = "", join_within: float = 0.0) -> DumpRound:
        """Asks every rank for a round now and returns it, this rank's own
        snapshot not yet written (see :meth:`answer_own`, :meth:`finish`).

        ``join_within``: when a round of the same tag was asked for less than
        that many seconds ago, or another rank is asking for one right now,
        join it instead (ranks that run out of memory together make one round,
        not one each). Without a store, or when it does not answer, the round
        is this rank's alone, numbered by this process (from 1)."""
        rnd = DumpRound(next(_local_rounds), _safe_tag(tag), str(reason), self.rank, self.world_size)
        if not self.coordinated:
            rnd.world_size = 1
            return rnd
        request = {"tag": rnd.tag, "reason": rnd.reason, "origin_rank": self.rank, "time": time.time()}
        try:
            n, req = _bounded(lambda: self._ask(request, join_within), min(self.timeout, 10.0),
                              "asking for a dump round")
            rnd.seq = int(n)
            with _own_lock:
                _own_rounds.add((self.rank, rnd.seq))
            rnd.reason = str(req.get("reason", rnd.reason))
            rnd.origin_rank = int(req.get("origin_rank", self.rank))
        except Exception as e:
            log.warning("memsight: could not ask the other ranks for snapshots: %s", e)
            rnd.world_size = 1
        return rnd

    def _ask(self, request: dict[str, Any], join_within: float) -> tuple[int, dict[str, Any]]:
        latest = claim = None
        if join_within > 0:
            latest = self._add("seq", 0)
            raw = self._request_of(latest, 5.0) if latest else None
            req = json.loads(raw) if raw else None
            if req and req.get("tag") == request["tag"] and request["time"] - req.get("time", 0) < join_within:
                return latest, req
            # One claimant per round: compare_set sets the key only where it is absent.
            claim = f"claim/{latest}"
            winner = self.store.compare_set(PREFIX + claim, "", str(self.rank))
            if (winner.decode() if isinstance(winner, bytes) else str(winner)) != str(self.rank):
                self.store.wait([PREFIX + claim + "/seq"], timedelta(seconds=5))
                n = int(json.loads(self._try_get(claim + "/seq") or "0"))
                return n, json.loads(self._try_get(f"{n}/request") or "{}")
        n = self._add("seq", 1)
        with _own_lock:
            _own_rounds.add((self.rank, n))
        self._set(f"{n}/request", request)
        if claim is not None:
            self.store.set(PREFIX + claim + "/seq", str(n))
        return n, request

    def meta_for(self, rnd: DumpRound) -> dict[str, Any]:
        """What this rank writes into its snapshot of the round (``memsight_rank``)."""
        return self._meta(rnd)

    def answer_own(self, rnd: DumpRound, written: str | None = None) -> None:
        """Writes (or, given `written`, links) this rank's snapshot for its own round."""
        self._dump_for(rnd, written)

    def finish(self, rnd: DumpRound, timeout: float | None = None) -> DumpRound:
        """Waits, at most ``timeout`` (default: the instance's), until every rank
        answered the round; then collects who wrote what and writes the
        manifest. Logs, never raises."""
        t0 = time.monotonic()
        limit = self.timeout if timeout is None else float(timeout)
        if rnd.world_size > 1 and self.coordinated:
            try:
                _bounded(lambda: self._wait_done(rnd, t0 + limit), limit + 0.5, "waiting for the ranks")
            except Exception as e:
                log.warning("memsight: %s", e)
            try:
                _bounded(lambda: self._collect(rnd), max(1.0, min(limit, 10.0)), "collecting the answers")
            except Exception as e:
                log.warning("memsight: %s", e)
        rnd.waited = round(time.monotonic() - t0, 3)
        for r in range(rnd.world_size):
            if r not in rnd.files and r not in rnd.missing:
                rnd.missing[r] = f"did not answer within {limit:g} s"
        rnd.manifest = write_manifest(rnd, self.folder, limit)
        return rnd

    def _wait_done(self, rnd: DumpRound, deadline: float) -> None:
        while self._add(f"{rnd.seq}/done", 0) < rnd.world_size and time.monotonic() < deadline:
            time.sleep(0.05)

    def _collect(self, rnd: DumpRound) -> None:
        for r in range(rnd.world_size):
            if r == self.rank:
                continue
            raw = self._try_get(f"{rnd.seq}/rank{r}")
            if raw is None:
                continue
            answer = json.loads(raw)
            if answer.get("file"):
                rnd.files[r] = str(answer["file"])
            else:
                rnd.missing[r] = str(answer.get("error", "no file"))

    def request(self, tag: str = "manual", reason: str = "", timeout: float | None = None) -> DumpRound:
        """A whole round: ask, dump here, wait for the others, write the manifest."""
        rnd = self.announce(tag, reason)
        self._dump_for(rnd)
        return self.finish(rnd, timeout)


# -- one per process --------------------------------------------------------------
_shared: RankDumps | None = None
_users = 0
_shared_lock = threading.Lock()


def watch_ranks(folder: str | None = None, **kwargs: Any) -> RankDumps:
    """Starts (once per process) answering other ranks' dump rounds, writing
    into ``folder``; later calls return the same watcher (a ``folder`` given
    then moves its next dumps). Call it on every rank after
    ``init_process_group`` (an armed OOMObserver does). Pair with
    :func:`unwatch_ranks`."""
    global _shared, _users
    with _shared_lock:
        if _shared is None:
            _shared = RankDumps(folder or ".", **kwargs)
        elif folder is not None:
            _shared.folder = folder
        _users += 1
        return _shared.start()


def unwatch_ranks() -> None:
    """Ends one :func:`watch_ranks`; the last one stops the watcher."""
    global _shared, _users
    with _shared_lock:
        _users = max(0, _users - 1)
        if _users == 0 and _shared is not None:
            _shared.stop()
            _shared = None


def shared_watcher() -> RankDumps | None:
    return _shared


def dump_all_ranks(tag: str = "manual", *, folder: str | None = None, reason: str = "",
                   timeout: float | None = None, store: Any = None) -> DumpRound:
    """Every rank of the job writes its snapshot now: this one at once, the
    others at their next check (within about a second; they must be watching:
    :func:`watch_ranks` or an armed OOMObserver). Waits at most ``timeout``
    seconds (default 30) for them, writes ``{tag}_{n}_manifest.json`` beside
    this rank's ``{tag}_{n}_rank{r}.pickle`` in ``folder`` (default: the
    watcher's, else the current folder) and returns the round. Read the files
    with ``memsight ranks FOLDER/{tag}_{n}_manifest.json``."""
    w = _shared
    if w is not None and store is None:
        if folder is not None and os.path.abspath(folder) != os.path.abspath(w.folder):
            w = RankDumps(folder, store=w.store, rank=w.rank, world_size=w.world_size, timeout=w.timeout,
                          snapshot=w._snapshot, state=w.state, thread=False)
    else:
        w = RankDumps(folder or ".", store=store, thread=False)
    return w.request(tag, reason, timeout)
