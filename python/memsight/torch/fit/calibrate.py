"""From a small real run: two recordings of the same steps at two batch
sizes (or sequence lengths) give each allocation's size as a line in the
batch; the history at any other batch follows, with everything fake
tensors cannot see (library workspaces and the algorithms the libraries
chose on the device) measured rather than modelled.

The two histories are aligned request by request (action and Python
stack); the same code at another batch makes nearly the same requests,
except where a library needs a workspace at one size and none at the
other: such a request is a line through zero. Histories of which less than
three quarters match are refused, naming the first request apart.
"""

from __future__ import annotations

from typing import Any

from .fake_trace import FakeTrace

_REQUESTS = ("alloc", "free_requested", "free_completed")


def _requests(snap: dict[str, Any], device: int) -> list[dict[str, Any]]:
    traces = snap.get("device_traces") or []
    if device >= len(traces) or not traces[device]:
        raise ValueError(f"the recording has no allocation history on device {device}: record it with "
                         "memsight.torch.record() or torch.cuda.memory._record_memory_history()")
    return [e for e in traces[device] if e.get("action") in _REQUESTS]


def _stack_key(e: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((f.get("filename"), f.get("line")) for f in e.get("frames") or () if
                 str(f.get("filename", "")).endswith(".py"))


def _where(e: dict[str, Any]) -> str:
    return next((f"{f['filename']}:{f['line']}" for f in e.get("frames") or ()
                 if str(f.get("filename", "")).endswith(".py")), "no Python frame")


def _live_before(entries: list[dict[str, Any]], snap: dict[str, Any], device: int) -> list[dict[str, Any]]:
    """Blocks that were live when the recording began: freed in it without
    being allocated in it, or live at its end without an alloc in it."""
    allocated: set[int] = set()
    out: dict[int, dict[str, Any]] = {}
    for e in entries:
        if e["action"] == "alloc":
            allocated.add(e["addr"])
        elif e["action"] == "free_completed" and e["addr"] not in allocated:
            out.setdefault(e["addr"], {"addr": e["addr"], "size": e["size"], "frames": e.get("frames", [])})
    seen_end: set[int] = {e["addr"] for e in entries if e["action"] == "alloc"}
    for seg in snap.get("segments", []):
        if seg.get("device", 0) != device:
            continue
        for b in seg.get("blocks", []):
            if b.get("state") == "active_allocated" and b["address"] not in seen_end:
                out.setdefault(b["address"], {"addr": b["address"], "size": b.get("requested_size", b["size"]),
                                              "frames": b.get("frames", [])})
    return list(out.values())


def _token(e: dict[str, Any]) -> tuple[Any, ...]:
    return (e["action"], _stack_key(e))


def calibrate(small: dict[str, Any], small_batch: int, large: dict[str, Any], large_batch: int, batch: int,
              device: int = 0) -> dict[str, Any]:
    """The requests-only history of the recorded steps at ``batch``, from
    recordings (``torch.cuda.memory._snapshot()`` dicts) at ``small_batch``
    and ``large_batch``. ``memsight.torch.Estimate.from_requests`` (or
    ``memsight estimate``) runs it through the allocator simulation.

    The two histories are aligned request by request (same action, same
    Python stack). A request only one of them makes (a library's workspace
    that is empty at one size, say) is a line through zero at the other."""
    if small_batch == large_batch:
        raise ValueError("the two recordings must be at two different batch sizes")
    a, b = _requests(small, device), _requests(large, device)
    pairs = _align(a, b)
    tr = FakeTrace(stacks=False)
    t = (batch - small_batch) / (large_batch - small_batch)
    # Each side's address -> (fake address, size): a pair's block is one fake block.
    maps: tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]] = ({}, {})
    # Blocks live before the recordings began (the weights, the optimizer's
    # state) do not grow with the batch: the small recording's.
    for blk in _live_before(a, small, device):
        maps[0][blk["addr"]] = (tr.alloc(device, blk["size"], blk["frames"]), blk["size"])
    for x, y in pairs:
        e: dict[str, Any] = x if x is not None else y
        if e["action"] == "alloc":
            sx = x["size"] if x is not None else 0
            sy = y["size"] if y is not None else 0
            size = max(0, round(sx + (sy - sx) * t))
            if size == 0:
                continue
            fake = (tr.alloc(device, size, e.get("frames", [])), size)
            tr.entries[device][-1]["user_metadata"] = e.get("user_metadata", "")
            if x is not None:
                maps[0][x["addr"]] = fake
            if y is not None:
                maps[1][y["addr"]] = fake
        elif e["action"] == "free_completed":
            got = None
            if x is not None:
                got = maps[0].pop(x["addr"], None)
            if y is not None:
                got = maps[1].pop(y["addr"], None) or got
            if got is not None:
                tr.free(device, got[0], got[1])
    meta = {"version": 1, "produced_by": f"memsight.torch.calibrate: recordings at batch {small_batch} and "
            f"{large_batch}, each request's size as a line in the batch, at batch {batch}",
            "terms": [], "notes": []}
    # The recordings' annotations keep their own clocks: phases come with
    # each request's user_metadata instead.
    return {"segments": [], "device_traces": tr.snapshot_traces(), "external_annotations": [],
            "memsight_estimate": meta}


def _align(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """The two histories' requests side by side: (x, y), (x, None) or
    (None, y). Refuses histories that share too little to be the same
    steps."""
    import difflib

    ta, tb = [_token(e) for e in a], [_token(e) for e in b]
    m = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    out: list[tuple[Any, Any]] = []
    same = 0
    for op, i1, i2, j1, j2 in m.get_opcodes():
        if op == "equal":
            out.extend(zip(a[i1:i2], b[j1:j2]))
            same += i2 - i1
        else:
            out.extend((x, None) for x in a[i1:i2])
            out.extend((None, y) for y in b[j1:j2])
    if same < 0.75 * max(len(a), len(b)):  # most of two runs of the same steps match
        first = next((i for i, (x, y) in enumerate(out) if x is None or y is None), 0)
        x, y = out[first]
        e = x if x is not None else y
        raise ValueError(f"the recordings are not of the same steps: {same:,} of {len(a):,} and {len(b):,} "
                         f"requests match; the first apart is {e['action']} at {_where(e)} (record the same "
                         "steps from the same point in both)")
    return out
