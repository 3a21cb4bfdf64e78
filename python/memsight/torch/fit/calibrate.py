"""From a small real run: two recordings of the same steps at two batch
sizes (or sequence lengths) give each allocation's size as a line in the
batch; the history at any other batch follows, with everything fake
tensors cannot see (library workspaces and the algorithms the libraries
chose on the device) measured rather than modelled.

The two histories must make the same requests in the same order, from the
same stacks: the same code at another batch does, unless a library picks
another algorithm for the other shapes; then the first difference is named.
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


def calibrate(small: dict[str, Any], small_batch: int, large: dict[str, Any], large_batch: int, batch: int,
              device: int = 0) -> dict[str, Any]:
    """The requests-only history of the recorded steps at ``batch``, from
    recordings (``torch.cuda.memory._snapshot()`` dicts) at ``small_batch``
    and ``large_batch``. ``memsight.torch.Estimate.from_requests`` (or
    ``memsight estimate``) runs it through the allocator simulation."""
    if small_batch == large_batch:
        raise ValueError("the two recordings must be at two different batch sizes")
    a, b = _requests(small, device), _requests(large, device)
    if len(a) != len(b):
        raise ValueError(f"the two recordings make {len(a):,} and {len(b):,} requests: not the same steps "
                         "(record the same number of steps from the same point in both)")
    for i, (x, y) in enumerate(zip(a, b)):
        if x["action"] != y["action"] or _stack_key(x) != _stack_key(y):
            raise ValueError(f"the recordings differ at request {i:,} ({x['action']} at {_where(x)} against "
                             f"{y['action']} at {_where(y)}): not the same steps, or a library chose another "
                             "path at the other batch size")
    tr = FakeTrace(stacks=False)
    t = (batch - small_batch) / (large_batch - small_batch)
    addr_of: dict[int, tuple[int, int]] = {}  # the small recording's address -> (fake address, size)
    for blk in _live_before(a, small, device):
        addr_of[blk["addr"]] = (tr.alloc(device, blk["size"], blk["frames"]), blk["size"])
    for x, y in zip(a, b):
        if x["action"] == "alloc":
            size = max(0, round(x["size"] + (y["size"] - x["size"]) * t))
            addr_of[x["addr"]] = (tr.alloc(device, size, x.get("frames", [])), size)
            tr.entries[device][-1]["user_metadata"] = x.get("user_metadata", "")
        elif x["action"] == "free_completed" and x["addr"] in addr_of:
            fake, size = addr_of.pop(x["addr"])
            tr.free(device, fake, size)
    meta = {"version": 1, "produced_by": f"memsight.torch.calibrate: recordings at batch {small_batch} and "
            f"{large_batch}, each request's size as a line in the batch, at batch {batch}",
            "terms": [], "notes": []}
    # The recordings' annotations keep their own clocks: phases come with
    # each request's user_metadata instead.
    return {"segments": [], "device_traces": tr.snapshot_traces(), "external_annotations": [],
            "memsight_estimate": meta}
