"""Snapshots with "memsight_holders", the key memsight.torch writes at a dump
(python/memsight/torch/capture/holders.py): who holds each live storage.
Laid over make_leaks' loops, whose truth is known: the blocks a frame left
live are named as items of one holder.

    from make_holders import held
    snap = held(ml.loop(steps=30, keep_output=True), ml.OUTPUT, "__main__.kept")
"""

from __future__ import annotations


def live_blocks_of(snap: dict, frame: dict) -> list[tuple[int, int]]:
    """(address, size) of the blocks `frame` allocated that are live at the end."""
    live = {b["address"]: b["size"] for seg in snap["segments"] for b in seg["blocks"]
            if b["state"] == "active_allocated"}
    made = [e["addr"] for e in snap["device_traces"][0]
            if e["action"] == "alloc" and e["frames"] and e["frames"][0] == frame]
    return [(a, live[a]) for a in made if a in live]


def held(snap: dict, frame: dict, holder: str, *, kind: str = "list", module: str = "__main__",
         file: str = "/work/project/train.py", line: int = 12, suffix: str = "", offset: int = 0) -> dict:
    """`snap` with the live blocks of `frame` held by `holder` (items [0], [1], ...;
    `suffix` ".grad_fn": kept by their autograd graphs). `offset`: storages start
    that many bytes into their blocks. Other holders already there are kept."""
    value = snap.setdefault("memsight_holders", {"version": 1, "elapsed_ms": 1.0, "complete": True,
                                                 "tensors": 0, "holders": [], "storages": []})
    h = len(value["holders"])
    value["holders"].append({"path": holder, "type": kind, "module": module, "file": file, "line": line})
    for i, (addr, size) in enumerate(live_blocks_of(snap, frame)):
        value["storages"].append({"device": 0, "addr": addr + offset, "size": size, "holder": h,
                                  "path": f"{holder}[{i}]{suffix}"})
        value["tensors"] += 1
    return snap
