"""``estimate`` and ``max_batch``: a step's peak memory, allocated and
reserved, before it runs, and the largest batch that fits (docs/estimate.md)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

from ..._engine import core
from ..._sizes import parse_size
from .step_trace import trace_step
from .terms import outside_allocator

log = logging.getLogger("memsight")


def format_size(n: int) -> str:
    return str(core().format_size(float(n)))


def _device_total(device_memory: int | str | None) -> int | None:
    """The device's memory in bytes: as given, else the local GPU's (None
    without one)."""
    if device_memory is not None:
        return parse_size(device_memory) if isinstance(device_memory, str) else int(device_memory)
    try:
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.mem_get_info()[1])
    except Exception:  # noqa: BLE001 - no device: the estimate has no bound
        pass
    return None


class Estimate:
    """The answer for one step: ``peak_allocated``, ``peak_reserved`` and
    ``unused_at_peak`` (bytes, torch's counters as the simulated allocator
    keeps them), ``fits`` (False: it runs out, at ``oom``), the ``terms``
    added for what fake tensors cannot see, ``whatif`` (the standard
    allocator settings, each simulated), ``snapshot`` (the synthetic torch
    snapshot, for ``summary``, the page, ``diff`` and ``whatif``).
    ``str()`` is the report; ``to_dict()`` / ``json()`` the same as data."""

    def __init__(self, requests: dict[str, Any], settings: tuple[str, ...], device_total: int | None,
                 memory_fraction: float | None, seconds: float,
                 outside_memory: int | str | None = None) -> None:
        import memsight

        self.requests = requests
        self.settings = settings
        self.device_total = device_total
        self.memory_fraction = memory_fraction
        self.seconds = seconds
        self.meta: dict[str, Any] = requests.get("memsight_estimate", {})  # what produced it
        self.outside = _outside_terms(self.meta.get("world_size"), outside_memory)
        self._snap = memsight.from_dict(requests)
        self._kw = _device_kw(device_total, memory_fraction, sum(t["bytes"] for t in self.outside))
        report = self._snap.whatif(*(settings or ("defaults",)), **self._kw)
        dev = report.devices[0]
        r = dev.results[0]
        self.limit = _limit(dev.memory)
        self.peak_allocated = int(r.peak_allocated)
        self.peak_reserved = int(r.peak_reserved)
        self.unused_at_peak = int(r.unused_at_peak)
        self.fits = int(r.stopped_at) < 0
        self.oom = None if self.fits else _plain(r.ooms[-1]) if r.ooms else {"event": int(r.stopped_at)}
        self.terms = list(self.meta.get("terms", []))
        self._whatif: Any = None
        self._unbounded: tuple[int, int] | None = None
        self._completed: Any = None

    def _need(self) -> tuple[int, int]:
        """(peak allocated, peak reserved) with no device limit: the step's
        own need (under a limit the simulation stops where the job would
        die, and the allocator frees its cache to fit)."""
        if self._unbounded is None:
            if not self._kw:
                self._unbounded = (self.peak_allocated, self.peak_reserved)
            else:
                r = self._snap.whatif(*(self.settings or ("defaults",))).devices[0].results[0]
                self._unbounded = (int(r.peak_allocated), int(r.peak_reserved))
        return self._unbounded

    @property
    def peak_reserved_unbounded(self) -> int:
        return self._need()[1]

    @property
    def whatif(self) -> Any:
        """The standard allocator settings on this step, each simulated
        (``Snapshot.whatif()``'s report)."""
        if self._whatif is None:
            self._whatif = self._snap.whatif(**self._kw)
        return self._whatif

    @classmethod
    def from_requests(cls, requests: dict[str, Any], *, device_memory: int | str | None = None,
                      memory_fraction: float | None = None, settings: tuple[str, ...] | list[str] = (),
                      outside_memory: int | str | None = None) -> Estimate:
        """The answer for a requests-only history made elsewhere
        (:func:`memsight.torch.calibrate`, or a saved ``trace_step``)."""
        return cls(requests, tuple(settings), _device_total(device_memory), memory_fraction, 0.0, outside_memory)

    @property
    def snapshot(self) -> Any:
        """The synthetic snapshot (a memsight Snapshot): the requests
        completed by the allocator simulation, written as a recording would
        be (``memsight estimate``); ``summary()``, ``html()``, ``whatif()``
        and ``diff`` read it."""
        if self._completed is None:
            self._completed = self._snap.estimate(*self.settings, **self._kw)
        return self._completed

    def save(self, path: str | os.PathLike[str]) -> str:
        """Writes the synthetic snapshot as torch's pickle (``.gz``, ``.zst``
        and ``.xz`` names compress); every memsight command and
        pytorch.org/memory_viz read it."""
        return str(self.snapshot.to_pickle(path))

    def html(self) -> str:
        """The page of the synthetic snapshot (self-contained, offline)."""
        return str(self.snapshot.html())

    def kinds_at_peak(self) -> list[tuple[str, int]]:
        """(kind, bytes) live at the allocated peak, largest first (the
        synthetic snapshot's kinds: tags, phase marks, stacks); empty when
        they cannot be read."""
        try:
            by = self.snapshot.categories("peak")["by_category"]
            return sorted(((k, int(v["bytes"])) for k, v in by.items() if v["bytes"] > 0), key=lambda kv: -kv[1])
        except Exception:  # noqa: BLE001 - the report stands without them
            log.debug("memsight: no kinds for the estimate", exc_info=True)
            return []

    def headroom(self) -> int | None:
        return None if self.limit is None else self.limit - self.peak_reserved

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "peak_allocated": self.peak_allocated, "peak_reserved": self.peak_reserved,
                "unused_at_peak": self.unused_at_peak, "fits": self.fits, "oom": self.oom,
                "limit": self.limit, "device_memory": self.device_total,
                "memory_fraction": self.memory_fraction, "settings": list(self.settings),
                "terms": self.terms, "outside_allocator": self.outside, "seconds": round(self.seconds, 3),
                "world_size": self.meta.get("world_size"), "rank": self.meta.get("rank"),
                "produced_by": self.meta.get("produced_by", "")}

    def json(self) -> str:
        return json.dumps(self.to_dict())

    def __str__(self) -> str:
        rank = f" (rank {self.meta['rank']} of {self.meta['world_size']})" if "world_size" in self.meta else ""
        lines = [f"memsight estimate: one training step{rank} under fake tensors, through torch's caching "
                 "allocator simulated" + (f" with {', '.join(self.settings)}" if self.settings else "")]
        lines.append(f"  peak allocated  {format_size(self.peak_allocated)}")
        lines.append(f"  peak reserved   {format_size(self.peak_reserved)}"
                     f"  ({format_size(self.unused_at_peak)} of it unused at the peak)")
        if self.limit is None:
            lines.append("  no device memory given and no GPU here: nothing to fit against")
        elif self.fits:
            lines.append(f"  fits in {format_size(self.limit)}: {format_size(self.limit - self.peak_reserved)} "
                         "to spare at the peak")
        else:
            need = int((self.oom or {}).get("requested", 0))
            lines.append(f"  runs out of {format_size(self.limit)}"
                         + (f": a request of {format_size(need)} does not fit" if need else ""))
            lines.append("  try: a smaller batch (memsight.torch.max_batch), activation checkpointing, "
                         "or the settings in .whatif")
        kinds = self.kinds_at_peak()
        if kinds:
            lines.append("  at the allocated peak: " + ", ".join(f"{k.replace('_', ' ')} {format_size(n)}"
                                                                for k, n in kinds))
        for t in self.terms:
            lines.append(f"  included: {t['name']} {format_size(int(t['bytes']))}")
        if self.outside and self.device_total is not None:
            lines.append("  taken from the device's memory: " + ", ".join(
                f"{t['name']} {format_size(int(t['bytes']))}" for t in self.outside))
        for n in self.meta.get("notes", []):
            lines.append(f"  not included: {n}")
        return "\n".join(lines)

    __repr__ = __str__


def _outside_terms(world_size: int | None, outside_memory: int | str | None) -> list[dict[str, Any]]:
    """What the job holds outside torch's allocator: the measured terms, or
    the user's figure in their place."""
    if outside_memory is None:
        return outside_allocator(world_size)
    n = parse_size(outside_memory) if isinstance(outside_memory, str) else int(outside_memory)
    if n < 0:
        raise ValueError(f"outside_memory must be 0 or more bytes, not {outside_memory!r}")
    return [{"name": "outside torch's allocator (as given)", "bytes": n}] if n else []


def _device_kw(total: int | None, fraction: float | None, outside: int) -> dict[str, Any]:
    """The simulation's device: cudaMalloc reaches the device's memory less
    what is held outside the allocator; a memory fraction caps the
    allocator at that fraction of the whole device, whichever is lower."""
    if total is None:
        return {} if fraction is None else {"memory_fraction": fraction}
    usable = total - outside
    if usable < 1 << 20:
        raise ValueError(f"device_memory {format_size(total)} leaves nothing for torch's allocator after "
                         f"{format_size(outside)} outside it (the CUDA context, NCCL): pass outside_memory=")
    if fraction is not None and fraction * total <= usable:
        return {"device_memory": total, "memory_fraction": fraction}
    return {"device_memory": usable}


def _limit(memory: Any) -> int | None:
    limit = int(getattr(memory, "limit", -1))
    if limit >= 0:
        return limit
    total = int(getattr(memory, "total", -1))
    return total if total >= 0 else None


def _plain(x: Any) -> dict[str, Any]:
    return {k: getattr(x, k) for k in ("event", "requested", "reserved", "allocated") if hasattr(x, k)}


def estimate(step: Callable[..., Any], model: Any, optimizer: Callable[..., Any] | None = None,
             inputs: Any = None, *, device_memory: int | str | None = None,
             memory_fraction: float | None = None, settings: tuple[str, ...] | list[str] = (),
             steps: int = 2, stacks: bool = True, world_size: int | None = None, rank: int = 0,
             outside_memory: int | str | None = None) -> Estimate:
    """The memory of ``step(model, optimizer, inputs)`` on a GPU, without one.

    The step runs ``steps`` times (two: the optimizer's state exists in the
    second) under torch's fake tensors; every CUDA allocation and free it
    makes goes through memsight's simulation of torch's caching allocator.

    ``model``: a module (copied under fake tensors, never touched) or a
    function that builds one; ``optimizer``: a function of the parameters
    (``lambda p: torch.optim.AdamW(p, lr=1e-4)``); ``inputs``: tensors (in
    lists, tuples, dicts) or a function of the step index returning them;
    ``device_memory``: the GPU's memory ("80GiB"; default: this machine's
    GPU); ``memory_fraction``: torch.cuda.set_per_process_memory_fraction's;
    ``settings``: PYTORCH_CUDA_ALLOC_CONF entries ("expandable_segments:True");
    ``world_size``: the step is rank ``rank`` of a job of that many ranks
    (FSDP2, DDP: the model factory may take the job's device mesh and shard
    the model; collectives run on torch's fake process group);
    ``outside_memory``: what the job holds outside torch's allocator (the
    CUDA context, NCCL's buffers), taken from ``device_memory``; default:
    the figures measured on an H200 (``terms.outside_allocator``), 0: none.
    """
    import time

    t0 = time.perf_counter()
    requests = trace_step(step, model, optimizer, inputs, steps=steps, stacks=stacks,
                          world_size=world_size, rank=rank)
    return Estimate(requests, tuple(settings), _device_total(device_memory), memory_fraction,
                    time.perf_counter() - t0, outside_memory)


def max_batch(make_inputs: Callable[[int, int], Any], step: Callable[..., Any], model: Any,
              optimizer: Callable[..., Any] | None = None, *, device_memory: int | str | None = None,
              memory_fraction: float | None = None, settings: tuple[str, ...] | list[str] = (),
              margin: float = 0.0, low: int = 1, high: int = 1 << 16, steps: int = 2,
              max_estimates: int = 10, world_size: int | None = None, rank: int = 0,
              outside_memory: int | str | None = None) -> tuple[int, list[tuple[int, Estimate]]]:
    """The largest batch (or sequence length: whatever ``make_inputs(n,
    step_index)`` scales) whose step fits, leaving ``margin`` (a fraction of
    the limit) free. Each estimate after the first two is aimed where the
    memory measured so far, drawn as a line, meets the limit, falling back
    to halving the bracket (:func:`_search`); at most ``max_estimates``
    estimates in all (a bracket still open then gives its lower, fitting
    end). Returns (the batch, the estimates made as (batch, Estimate)); the
    batch is ``low - 1`` when not even ``low`` fits. Near a memory cap the
    allocator's edge can be uneven (one batch runs out where a larger one
    fits): the search looks one batch past the first that runs out, and the
    answer is the largest batch found to fit (the estimates returned show
    any below it that run out). ``world_size``, ``rank``,
    ``outside_memory``: as :func:`estimate`."""
    total = _device_total(device_memory)
    if total is None:
        raise ValueError("max_batch needs the device's memory: pass device_memory=\"80GiB\" (no GPU here)")
    cap: int = total
    tried: list[tuple[int, Estimate]] = []

    def fits(n: int) -> bool:
        e = estimate(step, model, optimizer, lambda i: make_inputs(n, i), device_memory=cap,
                     memory_fraction=memory_fraction, settings=settings, steps=steps, stacks=False,
                     world_size=world_size, rank=rank, outside_memory=outside_memory)
        tried.append((n, e))
        limit = e.limit if e.limit is not None else cap
        ok = e.fits and e.peak_reserved <= limit * (1 - margin)
        log.info("memsight max_batch: %d %s (peak reserved %s)", n, "fits" if ok else "does not fit",
                 format_size(e.peak_reserved))
        return ok

    if not fits(low):
        return low - 1, tried
    target = (tried[0][1].limit or cap) * (1 - margin)
    return _search(fits, tried, low, high, target, lambda: len(tried) < max_estimates), tried


def _search(fits: Callable[[int], bool], tried: list[tuple[int, Estimate]], low: int, high: int,
            target: float, more: Callable[[], bool]) -> int:
    """The largest batch that fits, ``low`` known to (``fits`` adds each
    estimate to ``tried``). Each guess is where a line meets ``target``.
    While every batch tried fits, the line goes through the two largest,
    its slope the steeper of allocated and reserved memory (reserved memory
    grows in whole segments, flat between two small batches); as the need
    per sample grows with the batch, this line overshoots and brackets the
    edge. It is at least a step up, doubling while the steps fit (where the
    need per sample shrinks, the line falls short). Once a batch does not
    fit, the line goes through the reserved peaks (no limit) at the
    bracket's two ends; where one end moves twice in a row, the other's
    distance from the target halves for this line (the Illinois rule of
    regula falsi: the need is seldom linear). Where this line cannot say
    (under a cap the allocator frees its cache, so a step fits past it),
    or after three guesses in a row on one side (reserved memory grows in
    steps), the bracket halves. Once the edge is found, the batch one past
    the first that runs out is tried too (under a cap the allocator's edge
    can be uneven), and the search goes on from it if it fits."""
    lo, hi = low, high + 1  # lo fits, hi does not (high + 1: not yet known)
    fitting = [low]
    stride, stepped = 0, False  # the least step up after a batch that fits; the last guess was one
    last, run = True, 0  # the last guess's verdict, and how many in a row
    # The reserved peak less the target at each end, as the bracket's line takes them.
    f_lo, f_hi = _need_of(tried, low)[1] - target, 0.0
    while more():
        if hi - lo <= 1:
            # The edge is found; near a cap it can be uneven (a batch runs
            # out where the next one fits): one past it is tried, and the
            # search goes on from there if it fits.
            if hi + 1 > high or hi + 1 in (n for n, _ in tried):
                break
            if not fits(hi + 1):
                break
            lo, f_lo, hi = hi + 1, _need_of(tried, hi + 1)[1] - target, high + 1
            fitting.append(lo)
            last, run = True, 1
            continue
        if len(fitting) < 2:
            guess = 4 * lo
        elif run >= 3 and hi <= high:  # three in a row on one side: the lines are not closing in
            guess = (lo + hi) // 2
        elif hi > high:
            a, b = _need_of(tried, fitting[-2]), _need_of(tried, fitting[-1])
            slope = max(b[0] - a[0], b[1] - a[1]) / (fitting[-1] - fitting[-2])
            line = int(lo + (target - b[1]) / slope) if slope > 0 else 2 * lo
            stride = 2 * stride if stepped else max(1, lo // 32)
            stepped = line < lo + stride
            guess = max(line, lo + stride)
        elif f_lo < 0 < f_hi:
            guess = int(lo + -f_lo * (hi - lo) / (f_hi - f_lo))
        else:
            guess = (lo + hi) // 2
        guess = max(lo + 1, min(guess, hi - 1, high))
        ok = fits(guess)
        stepped = stepped and ok
        run = run + 1 if ok == last else 1
        last = ok
        if ok:
            lo, f_lo = guess, _need_of(tried, guess)[1] - target
            fitting.append(guess)
            if run >= 2:  # the Illinois rule
                f_hi /= 2
        else:
            hi, f_hi = guess, _need_of(tried, guess)[1] - target
            if run >= 2:
                f_lo /= 2
    return lo


def _need_of(tried: list[tuple[int, Estimate]], n: int) -> tuple[int, int]:
    return next(e for m, e in reversed(tried) if m == n)._need()
