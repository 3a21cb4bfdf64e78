"""MemProfiler's files: the statistics (safe YAML, optional pickle), the
FSDP tracker's reports, and what grew between two allocator snapshots by
user site. Every file is written atomically."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
from collections.abc import Mapping
from typing import Any

from .._util.atomic import write_atomic

log = logging.getLogger("memsight")

#: How many sites a call's growth table keeps (largest first).
GROWTH_SITES = 25


def plain(value: Any) -> Any:
    """``value`` as plain mappings, lists, numbers and strings (what
    ``yaml.safe_load`` reads back): no defaultdicts, tuples, sets or tensors."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [plain(v) for v in items]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if hasattr(value, "item"):  # a 0-d tensor or numpy scalar
        try:
            return plain(value.item())
        except Exception:
            pass
    return str(value)


def stats_paths(folder: str, rank: int) -> tuple[str, str]:
    base = os.path.join(folder, f"rank_{rank}_memory_stats")
    return base + ".yaml", base + ".pickle"


def write_stats(folder: str, rank: int, stats: dict[str, Any], yaml_on: bool, pickle_on: bool) -> list[str]:
    """Writes ``rank_{rank}_memory_stats.yaml`` / ``.pickle``; returns the paths written."""
    data = plain(stats)
    yaml_path, pickle_path = stats_paths(folder, rank)
    written = []
    if yaml_on:
        import yaml  # type: ignore[import-untyped]

        write_atomic(yaml_path, yaml.safe_dump(data, sort_keys=True).encode("utf-8"))
        written.append(yaml_path)
    if pickle_on:
        write_atomic(pickle_path, pickle.dumps(data, protocol=4))
        written.append(pickle_path)
    return written


# -- allocator snapshots ----------------------------------------------------------
def _block_frames(block: Mapping[str, Any]) -> list[Any]:
    frames = block.get("frames")
    if frames:
        return list(frames)
    history = block.get("history") or []  # torch < 2.1 kept them per history entry
    if history and isinstance(history[-1], Mapping):
        return list(history[-1].get("frames") or [])
    return []


def active_blocks(snapshot: Mapping[str, Any]) -> dict[tuple[int, int], Mapping[str, Any]]:
    """The allocated blocks of a ``torch.cuda.memory._snapshot()``, by (address, size)."""
    out: dict[tuple[int, int], Mapping[str, Any]] = {}
    for seg in snapshot.get("segments", []) or []:
        addr = int(seg.get("address", 0))
        for blk in seg.get("blocks", []) or []:
            size = int(blk.get("size", 0))
            if blk.get("state") in ("active_allocated", "active_pending_free"):
                out[(int(blk.get("address", addr)), size)] = blk
            addr += size
    return out


def _fallback_site(frames: list[Any]) -> str:
    """The innermost frame outside torch and installed packages (used only
    where the compiled engine, which knows the full rule, is missing)."""
    for f in frames:
        name = str(f.get("filename", "")) if isinstance(f, Mapping) else ""
        if not name or "site-packages" in name or "dist-packages" in name or "/torch/" in name:
            continue
        if name.startswith("<") or name.startswith("??"):
            continue
        return f"{name.rsplit('/', 1)[-1]}:{f.get('line', 0)}:{f.get('name', '')}"
    return ""


def site_of(frames: list[Any]) -> str:
    try:
        from ...snapshot import frame_site

        return frame_site(frames) or "(no Python frame)"
    except Exception:  # the engine is not built (EngineNotBuiltError) or refuses the frames
        return _fallback_site(frames) or "(no Python frame)"


def site_totals(snapshot: Mapping[str, Any]) -> dict[str, list[int]]:
    """Allocated bytes and blocks by site: ``{site: [bytes, blocks]}``."""
    sites: dict[str, list[int]] = {}
    for blk in active_blocks(snapshot).values():
        row = sites.setdefault(site_of(_block_frames(blk)), [0, 0])
        row[0] += int(blk.get("size", 0))
        row[1] += 1
    return sites


def growth_by_site(start: dict[str, list[int]], end: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What grew from ``start`` (:func:`site_totals` of the first snapshot)
    to the ``end`` snapshot, by site: ``[{"site", "bytes", "blocks"}]`` with
    the net change of each site that grew, largest first."""
    rows: list[dict[str, Any]] = []
    for site, (b, n) in site_totals(end).items():
        b0, n0 = start.get(site, (0, 0))
        if b > b0:
            rows.append({"site": site, "bytes": b - b0, "blocks": n - n0})
    rows.sort(key=lambda r: (-r["bytes"], r["site"]))
    return rows[:GROWTH_SITES]


# -- FSDP2 --------------------------------------------------------------------------
def fsdp_tracker(root: Any, optimizer: Any) -> Any:
    """torch's ``FSDPMemTracker`` on ``root`` (which must have ``fully_shard`` applied)."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    return FSDPMemTracker(root, optimizer)


def _captured(fn: Any, **kwargs: Any) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            fn(**kwargs)
        except ImportError:  # tabulate is an optional package
            if not kwargs.get("tabulate"):
                raise
            fn(**{**kwargs, "tabulate": False})
    return buf.getvalue()


def fsdp_report(tracker: Any, fn: str, iter_idx: int, depth: int, units: str, tabulate: bool) -> str:
    """The peak and per-module text reports of one tracked call."""
    rule = "-" * 80
    peak = _captured(tracker.display_snapshot, type="peak", units=units, tabulate=tabulate)
    modules = _captured(tracker.display_modulewise_snapshots, depth=depth, units=units, tabulate=tabulate)
    return (
        f"Iteration {iter_idx} {fn} Peak FSDP memory stats:\n{rule}\n{peak}\n"
        f"Iteration {iter_idx} {fn} Modulewise FSDP memory stats:\n{rule}\n{modules}"
    )


def fsdp_peak(tracker: Any) -> dict[str, dict[str, int]]:
    """The tracker's peak snapshot as ``{device: {category: bytes}}``."""
    snap = tracker.get_tracker_snapshot("peak")
    return {str(dev): {str(getattr(k, "value", k)): int(v) for k, v in d.items()} for dev, d in snap.items()}


def fsdp_log_path(folder: str, rank: int, fn: str, iter_idx: int) -> str:
    return os.path.join(folder, f"fsdp_mem_rank_{rank}_{fn}_{iter_idx}.log")


def history_path(folder: str, rank: int, fn: str, iter_idx: int, ctx: str) -> str:
    return os.path.join(folder, f"cuda_alloc_rank_{rank}.{fn}.{iter_idx}.{ctx}.pickle")
