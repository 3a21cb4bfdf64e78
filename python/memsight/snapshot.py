"""Snapshots and the analyses of the CLI, as Python objects and as text.

Everything here is a thin layer over ``memsight._core``: the engine reads,
analyses and renders; this module names things and writes files.
"""

from __future__ import annotations

import json
import os
import pickle
import threading
from typing import Any

from . import _notebook
from ._engine import core
from ._errors import MemsightError
# The names below are memsight.snapshot's as well (memsight/__init__ and the
# torch tools import them from here; tests patch frame_site and loads here).
from ._frames import _user_code, frame_kinds as frame_kinds, frame_site as frame_site
from ._paths import PathLike, _fspath, _write_text
from ._plain import explain
from ._results import SVG_KINDS, Comparison, FoldedStacks, Summary, _parse_comparison

# The page's first view: the page's own names, and the names torch's
# _memory_viz gives its pages (trace_plot, segment_plot) and their views.
HTML_VIEWS: dict[str, str] = {
    "overview": "overview",
    "timeline": "timeline",
    "trace_plot": "timeline",
    "Active Memory Timeline": "timeline",
    "segments-timeline": "segments-timeline",
    "segment_timeline": "segments-timeline",
    "Active Cached Segment Timeline": "segments-timeline",
    "state": "state",
    "segment_plot": "state",
    "Allocator State History": "state",
    "pools": "pools",
    "Allocated Memory (incl. Private Pools)": "pools",
    "flamegraph": "flamegraph",
    "settings": "settings",
    "Allocator Settings": "settings",
    "leaks": "leaks",
}



class Snapshot:
    """A PyTorch CUDA memory snapshot, read by memsight's engine.

    Create one with :func:`memsight.load` / :func:`memsight.loads`.
    """

    __slots__ = ("_snap", "source", "_summary", "_lock", "_answer")

    def __init__(self, core_snapshot: Any, source: str | None = None) -> None:
        self._snap = core_snapshot
        self.source = source
        self._summary: Any = None  # the engine's summary (default user code), computed once
        self._lock = threading.Lock()
        self._answer: Summary | None = None  # estimate(): the answer it printed

    def __repr__(self) -> str:
        where = f" from {self.source!r}" if self.source else ""
        if not self.has_trace:
            return f"<memsight.Snapshot{where}: {self.segment_count} segments, trace not read>"
        return (
            f"<memsight.Snapshot{where}: {self.device_count} device(s), "
            f"{self.segment_count} segments, {self.trace_entry_count} trace entries>"
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """IPython's plain-text form: the summary's text."""
        p.text(_notebook.pretty_text(self))

    def _repr_html_(self) -> str | None:
        """A notebook's form: the page inline, sandboxed (see memsight._notebook)."""
        return _notebook.page_html(self)

    @property
    def has_trace(self) -> bool:
        """False when loaded with ``trace=False``: the trace was checked, not read."""
        return not self._snap.trace_skipped

    def _need_trace(self, what: str) -> None:
        if not self.has_trace:
            raise MemsightError(
                f"{what} needs the trace, and this snapshot was loaded with trace=False; "
                "load it again with trace=True (the default)"
            )

    # -- the model, in numbers -------------------------------------------------
    @property
    def device_count(self) -> int:
        """Devices in the trace (one list of entries each)."""
        self._need_trace("device_count")
        return int(self._snap.device_count)

    @property
    def segment_count(self) -> int:
        return int(self._snap.segment_count)

    @property
    def block_count(self) -> int:
        return int(self._snap.block_count)

    @property
    def trace_entry_count(self) -> int:
        """Trace entries over all devices."""
        self._need_trace("trace_entry_count")
        return int(self._snap.trace_entry_count)

    @property
    def device_trace_lengths(self) -> list[int]:
        self._need_trace("device_trace_lengths")
        return list(self._snap.device_trace_lengths)

    # -- torch's text tools (byte for byte) ------------------------------------
    def stats(self) -> str:
        """``memsight stats``: torch's ``_memory_viz.segsum`` text."""
        return self._snap.segsum()

    def trace(self) -> str:
        """``memsight trace``: torch's ``_memory_viz.trace`` text."""
        self._need_trace("trace()")
        return self._snap.trace_text()

    def segments(self) -> FoldedStacks:
        """``memsight segments``: folded stacks by stream, segment and state."""
        text, stacks = self._snap.folded_stacks("segments")
        return FoldedStacks(text, "segments", _kinds_of=self._snap, _stacks=tuple(stacks))

    def memory(self) -> FoldedStacks:
        """``memsight memory``: folded stacks of allocated memory."""
        text, stacks = self._snap.folded_stacks("memory")
        return FoldedStacks(text, "memory", _kinds_of=self._snap, _stacks=tuple(stacks))

    def compare(self, after: Snapshot) -> Comparison:
        """``memsight compare self after``."""
        text, folded, stacks = core().compare(self._snap, after._snap)
        parsed = _parse_comparison(text)
        return Comparison(
            text=text,
            folded=FoldedStacks(folded, "segments", _stacks=tuple(stacks)),
            only_before=parsed.get("only_before", []),
            only_after=parsed.get("only_after", []),
        )

    # -- summary ---------------------------------------------------------------
    def _summary_of(self, user_code: str | list[str] | None = None) -> Any:
        """The engine's summary, which writes its text and JSON on demand."""
        self._need_trace("the summary")
        uc = _user_code(user_code)
        if uc:
            return self._snap.summarize(uc)
        with self._lock:
            if self._summary is None:
                self._summary = self._snap.summarize()
            return self._summary

    def summary_text(self, user_code: str | list[str] | None = None, frames: str = "user") -> str:
        """``memsight summary``: torch's peak counters, allocation sites in your
        code, memory from before the recording and, after an OOM, its causes
        and fixes. ``frames="all"`` lists every frame of each stack;
        ``user_code`` widens or narrows what counts as your code (filename
        substrings, ``"!PATTERN"`` to exclude), as ``--user-code`` does."""
        if frames not in ("user", "all"):
            raise ValueError(f"frames must be 'user' or 'all', not {frames!r}")
        return self._summary_of(user_code).text(frames == "all")

    def summary_json(self, user_code: str | list[str] | None = None) -> str:
        """``memsight summary --json``."""
        return self._summary_of(user_code).json()

    def summary(self, user_code: str | list[str] | None = None) -> Summary:
        """The summary as a Python object (the JSON the CLI prints, as a dict)."""
        s = self._summary_of(user_code)
        return Summary(_every_device(json.loads(s.groups_json())), s.text())

    # -- what kind of memory ----------------------------------------------------
    def categories(self, at: str | int = "peak", device: int | None = None) -> Summary:
        """What kind of memory was allocated at one moment, and whose.

        ``at``: ``"peak"`` (the allocated peak), ``"snapshot"`` (the end of
        the trace), ``"oom"`` (the first OOM), ``"oom:K"`` (the K-th, from 0),
        ``"step:N"`` (the start of step N, as :meth:`leaks` finds the steps)
        or a trace entry index (the state after it; -1: before the first).
        ``device``: default the device with the longest trace. Returns a dict
        with attribute access: ``total``, ``by_category`` (for each of
        parameter, gradient, optimizer_state, buffer, activation, temporary,
        autograd_internal, before_recording, unknown, communication: ``bytes`` (block
        bytes, as ``memory_allocated()`` counts them), ``tagged`` (of them,
        recorded by memsight.torch rather than inferred), ``requested``,
        ``count``), ``modules`` (the module tree, depth first, each with its
        submodules: ``name``, ``parent``, ``total``, ``by_category``) and
        ``unattributed`` (bytes of no known module). docs/summary.md says how
        each block is classified.
        """
        self._need_trace("categories()")
        if isinstance(at, bool) or not isinstance(at, (str, int)):
            raise ValueError(f"at must be 'peak', 'snapshot', 'oom', 'oom:K' or a trace entry index, not {at!r}")
        if device is None:
            lengths = self.device_trace_lengths
            device = max(range(len(lengths)), key=lambda d: lengths[d]) if lengths else 0
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ValueError(f"device must be a device number, not {device!r}")
        return Summary(json.loads(self._snap.categories_json(device, str(at))))

    # -- leaks ---------------------------------------------------------------------
    def leaks(self, user_code: str | list[str] | None = None) -> Summary:
        """``memsight leaks``: memory that grows from iteration to iteration.

        Per device (``devices``; alike devices once, listed in ``alike``
        as ``[[first, last], ...]``): the iterations found (``iterations.source``:
        memsight steps, profiler steps, optimizer steps or repeating
        allocations), the ``verdict`` (``leak``, ``none``, ``too few
        iterations``, ``no iterations``, ``no trace``) and its ``message``,
        ``bytes_per_iteration``, the leaking ``sites`` (each with
        ``bytes_per_iteration``, ``iterations_grown`` of ``measured``,
        ``surviving_bytes``/``surviving_count``, ``category``, ``module``,
        ``made_in``, ``stack``, ``frames`` and the ``newest`` survivors), the
        line to ``fix`` and ``growth`` (live bytes at the start of each
        iteration, of all memory and per site). ``str()`` is the text the CLI
        prints. docs/leaks.md says what counts as a leak.
        """
        self._need_trace("leaks()")
        text, js = self._snap.leaks_text_and_json(_user_code(user_code))
        return Summary(json.loads(js), text)

    # -- allocator settings -------------------------------------------------------
    def whatif(self, *settings: str, device_memory: int | str | None = None,
               memory_fraction: float | None = None) -> Summary:
        """``memsight whatif``: each device's recorded requests through a simulation
        of torch's caching allocator under other settings.

        ``settings``: ``"KEY:VALUE"`` strings as ``PYTORCH_CUDA_ALLOC_CONF`` takes
        them (``"expandable_segments:True"``, ``"max_split_size_mb:128"``,
        ``"garbage_collection_threshold:0.8"``, ``"roundup_power2_divisions:4"``,
        ``"per_process_memory_fraction:0.5"``; ``"defaults"`` starts from torch's
        defaults), together one alternative applied over the recorded settings;
        none: the standard alternatives, sorted by peak reserved.
        ``device_memory``: the device's memory (``torch.cuda.mem_get_info()[1]``)
        where the snapshot does not say: bytes, or a size with a unit as the
        CLI takes it (``"80G"``, ``"80GiB"``); below 1 MiB is refused (a unit
        left out);
        ``memory_fraction``: what the job passed to
        ``torch.cuda.set_per_process_memory_fraction`` (snapshots do not record it).

        Returns the CLI's JSON with attribute access: ``devices``, each with its
        ``self_check`` (whether the simulation under the recorded settings makes
        the recorded segment events and peak) and ``results`` (``settings``,
        ``peak_reserved``, ``unused_at_peak``, ``ooms``, ``recorded_ooms_avoided``,
        ``stopped_at``, ...); ``str()`` is the text the CLI prints. docs/whatif.md
        says what is simulated. A setting that cannot be simulated raises
        MemsightError.
        """
        self._need_trace("whatif()")
        _check_simulation(settings, device_memory, memory_fraction)
        text, js = self._snap.whatif_text_and_json(
            ",".join(settings), "" if device_memory is None else str(device_memory),
            0.0 if memory_fraction is None else float(memory_fraction))
        return Summary(json.loads(js), text)

    def estimate(self, *settings: str, device_memory: int | str | None = None,
                 memory_fraction: float | None = None) -> Snapshot:
        """``memsight estimate``: this requests-only snapshot (memsight.torch.estimate's:
        allocations and frees, no segments) through the simulation of torch's
        caching allocator, made whole: returns the completed snapshot, with the
        segment events the allocator takes, each block at its address, the
        segments as the run ends and torch's oom entry where it runs out of memory.

        ``settings``, ``device_memory`` and ``memory_fraction`` as for
        :meth:`whatif` (the settings apply over those the snapshot names, torch's
        defaults when it names none); without ``device_memory`` nothing bounds
        the run. The returned snapshot's :attr:`estimate_answer` holds what the
        CLI prints (peaks, unused memory at the peak, fits or where it runs out,
        the what-if table); ``to_pickle(path)`` saves it. A snapshot that already
        holds segments raises MemsightError. docs/estimate.md.
        """
        self._need_trace("estimate()")
        _check_simulation(settings, device_memory, memory_fraction)
        core, text, js = self._snap.estimate_completed(
            ",".join(settings), "" if device_memory is None else str(device_memory),
            0.0 if memory_fraction is None else float(memory_fraction))
        out = Snapshot(core, self.source)
        out._answer = Summary(json.loads(js), text)
        return out

    @property
    def estimate_answer(self) -> Summary | None:
        """What :meth:`estimate` printed for this completed snapshot (the CLI's JSON
        with attribute access; ``str()`` is its text), or None."""
        return self._answer

    # -- rendering ---------------------------------------------------------------
    def html(self, view: str = "overview", title: str | None = None, with_summary: bool = True,
             user_code: str | list[str] | None = None) -> str:
        """The self-contained page (works offline from file://), opening on
        ``view``: ``overview``, ``timeline`` (torch's trace_plot),
        ``segments-timeline``, ``state`` (torch's segment_plot), ``pools``
        (private pools), ``flamegraph`` or ``settings`` (allocator settings). With ``with_summary`` the overview shows the summary
        (peaks, top sites, OOM diagnosis)."""
        if view not in HTML_VIEWS:
            raise ValueError(f"unknown view {view!r}: expected one of {sorted(set(HTML_VIEWS.values()))}")
        self._need_trace("the page")
        summary = ""
        if with_summary:
            try:
                # as `memsight view` embeds it: the devices the page holds
                # (those with something on them), alike devices once
                summary = self._summary_of(user_code).page_json()
            except Exception:  # the page shows its own basic facts instead
                summary = ""
        source_name = os.path.basename(self.source) if self.source else ""
        source_bytes = 0
        if self.source:
            try:
                source_bytes = os.path.getsize(self.source)
            except OSError:
                pass
        return self._snap.render_html(
            view=HTML_VIEWS[view], title=title or source_name or "memsight", source_name=source_name,
            source_bytes=source_bytes, summary_json=summary, user_code=_user_code(user_code),
        )

    def to_html(self, path: PathLike, view: str = "overview", title: str | None = None, *,
                force: bool = False) -> str:
        """Writes :meth:`html` to ``path`` (atomically) and returns the path.
        A read-only ``path`` is refused (:class:`memsight.MemsightError`) unless ``force=True``, as the CLI's ``--force``."""
        return _write_text(path, self.html(view, title), force)

    def svg(self, kind: str = "segments", title: str | None = None, width: int = 1200) -> str:
        """A flamegraph SVG: ``kind`` is ``segments`` or ``memory``."""
        if kind not in SVG_KINDS:
            raise ValueError(f"unknown flamegraph kind {kind!r}: expected one of {sorted(SVG_KINDS)}")
        # Drawn from the stacks as data: any frame name works, a newline too.
        return self._snap.flamegraph_svg(kind, title or SVG_KINDS[kind], width)

    def to_svg(
        self, path: PathLike, kind: str = "segments", title: str | None = None, width: int = 1200,
        *, force: bool = False,
    ) -> str:
        """Writes :meth:`svg` to ``path`` (atomically) and returns the path.
        A read-only ``path`` is refused (:class:`memsight.MemsightError`) unless ``force=True``, as the CLI's ``--force``."""
        return _write_text(path, self.svg(kind, title, width), force)

    # -- back to torch's format --------------------------------------------------
    def pickle(self) -> bytes:
        """The snapshot as a torch-compatible pickle (protocol 4)."""
        self._need_trace("pickle()")
        return self._snap.pickle()

    def to_pickle(self, path: PathLike, *, force: bool = False) -> str:
        """Writes the pickle to ``path``; gzip for ``.gz``, zstd for ``.zst``/``.zstd``, xz
        for ``.xz``. Another compression suffix (``.bz2``, ``.lz4``, ...) raises
        :class:`memsight.MemsightError` before anything is written.
        A read-only ``path`` is refused (:class:`memsight.MemsightError`) unless ``force=True``, as the CLI's ``--force``."""
        self._need_trace("to_pickle()")
        p = _fspath(path)
        self._snap.write(p, bool(force))
        return p

    def to_dict(self) -> Any:
        """The snapshot as the plain dicts and lists ``torch.cuda.memory._snapshot()`` returns."""
        # Our own pickle holds data opcodes only, so loading it runs no code.
        return pickle.loads(self.pickle())


def _every_device(data: dict[str, Any]) -> dict[str, Any]:
    """The summary with every device in its place, from each group of alike
    devices: the devices of a group share its values (a snapshot may list
    100,000 alike devices), each with its own "device"."""
    devices: list[Any] = []
    for group in data["devices"]:
        for first, last in group.pop("alike"):
            for d in range(first, last + 1):
                if len(devices) <= d:
                    devices.extend([None] * (d + 1 - len(devices)))
                devices[d] = group if d == group["device"] else {**group, "device": d}
    data["devices"] = devices
    return data


def _check_simulation(settings: tuple[str, ...], device_memory: int | str | None,
                      memory_fraction: float | None) -> None:
    """The arguments of whatif() and estimate(), checked as the CLI checks them."""
    for s in settings:
        if not isinstance(s, str) or not s.strip():
            raise ValueError(f"a setting is a 'KEY:VALUE' string such as 'expandable_segments:True', not {s!r}")
    if device_memory is not None and (isinstance(device_memory, bool)
                                      or not isinstance(device_memory, (int, str))):
        raise ValueError(f"device_memory must be bytes or a size such as '80G', not {device_memory!r}")
    if memory_fraction is not None and (isinstance(memory_fraction, bool)
                                        or not isinstance(memory_fraction, (int, float))
                                        or not 0 < memory_fraction <= 1):
        raise ValueError(f"memory_fraction must be a number in (0, 1], not {memory_fraction!r}")


def load(
    path: PathLike, progress: Any = None, *, trace: bool = True, max_expanded: int | None = None
) -> Snapshot:
    """Reads a snapshot file: a torch pickle, optionally gzip/zstd/xz-compressed.

    ``progress``, if given, is called now and then as ``progress(done, total)``
    with byte counts. With ``trace=False`` only segments and blocks are read
    (the trace is checked, not decoded): enough for :meth:`Snapshot.stats`,
    ``segments()``, ``memory()``, ``compare()`` and ``svg()``, and several
    times faster on a big file; what needs the trace then raises
    :class:`memsight.MemsightError`. A compressed file may expand to 100 times
    the compressed bytes read so far plus 64 MiB, at most 32 GiB;
    ``max_expanded`` (bytes) sets another limit, as the CLI's
    ``--max-expanded``. Raises :class:`memsight.MemsightError` for bad input
    (a file of another kind, such as a torch.profiler trace, is named with the
    command that reads it) and ``FileNotFoundError`` for a missing file.
    """
    p = _fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(2, "No such file or directory", p)
    return Snapshot(core().load(p, progress, trace, _limit(max_expanded)), source=p)


def _limit(max_expanded: int | None) -> int:
    if max_expanded is None:
        return 0
    if isinstance(max_expanded, bool) or not isinstance(max_expanded, int) or max_expanded <= 0:
        raise ValueError(f"max_expanded must be a positive number of bytes, got {max_expanded!r}")
    return max_expanded


def loads(data: bytes | bytearray | memoryview, *, max_expanded: int | None = None) -> Snapshot:
    """Reads a snapshot from pickled (optionally compressed) bytes;
    ``max_expanded`` as for :func:`load`."""
    return Snapshot(core().loads(data, _limit(max_expanded)))


def from_dict(data: Any) -> Snapshot:
    """A snapshot from the dict ``torch.cuda.memory._snapshot()`` returned.

    Raises :class:`memsight.MemsightError` naming the place of the first value
    that is not plain data (an object, a generator, a str with a lone
    surrogate), of a container that contains itself, or of nesting deeper
    than 1000 levels.
    """
    try:
        data_bytes = pickle.dumps(data, protocol=4)
    except Exception as e:  # noqa: BLE001 - an object's __reduce__ may raise anything
        raise explain(data) or MemsightError(f"cannot pickle the snapshot: {e}") from None
    # Cheap checks first; the full walk runs only on what the engine refuses
    # or on text the engine would keep but not encode.
    if b"\xed" in data_bytes:  # UTF-8 of U+D000-U+DFFF, lone surrogates among them
        if (err := explain(data)) is not None:
            raise err
    try:
        return loads(data_bytes)
    except MemsightError:
        if (err := explain(data)) is not None:
            raise err from None
        raise


def compare(before: Snapshot | PathLike, after: Snapshot | PathLike) -> Comparison:
    """``memsight compare``: accepts snapshots or paths."""
    b = before if isinstance(before, Snapshot) else load(before, trace=False)
    a = after if isinstance(after, Snapshot) else load(after, trace=False)
    return b.compare(a)
