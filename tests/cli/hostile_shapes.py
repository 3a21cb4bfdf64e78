"""Inputs shaped to multiply work (issue 34, items 1 and 3): many devices
against many annotations, many live segments, many devices alike except
their times. Each builder returns the dict torch would pickle; pickling it
with protocol 4 writes a value referred to many times once (its memo), so a
million references to one annotation cost a few bytes each.

Used by tests/cli (small sizes), bench/hostile_memory.py and
bench/complexity_bench.py (large ones).
"""
from __future__ import annotations

MiB = 1 << 20


def entry(i: int, action: str = "alloc", size: int = 512, addr: int | None = None,
          time_us: int | None = None) -> dict:
    return {"action": action, "addr": 4096 * i if addr is None else addr, "size": size,
            "stream": 0, "time_us": i if time_us is None else time_us, "frames": []}


def annotation(name: str, device: int = 0, time_us: int = 1, stage: str = "START") -> dict:
    return {"stage": stage, "name": name, "device": device, "time_us": time_us}


def shared_annotation(devices: int, references: int, entries_per_device: int = 1) -> dict:
    """`devices` devices of a few allocations each and `references`
    references to one annotation dict (a profiler step of device 0): every
    device scanned the whole list."""
    one = annotation("ProfilerStep#1")
    return {"segments": [], "device_traces": [[entry(i) for i in range(entries_per_device)]
                                              for _ in range(devices)],
            "external_annotations": [one] * references}


def annotations_per_device(devices: int, per_device: int) -> dict:
    """`devices` devices, each with its own `per_device` profiler steps (a
    START an entry) and a trace entry after each: devices x annotations
    distinct annotations."""
    traces, notes = [], []
    for d in range(devices):
        traces.append([entry(i, time_us=2 * i + 1) for i in range(per_device)])
        notes += [annotation(f"ProfilerStep#{i}", d, 2 * i) for i in range(per_device)]
    return {"segments": [], "device_traces": traces, "external_annotations": notes}


def live_segments(n: int, size: int = 12 * MiB) -> dict:
    """`n` requests of `size` (over 10 MiB: a segment each, torch's rule),
    never freed: the trace holds n segment_alloc events and ends with n live
    segments, each one block."""
    base, trace = 0x7F0000000000, []
    for i in range(n):
        addr = base + i * 2 * size
        trace.append(entry(2 * i, "segment_alloc", size, addr, 2 * i))
        trace.append(entry(2 * i + 1, "alloc", size, addr, 2 * i + 1))
    segments = [{"device": 0, "address": base + i * 2 * size, "total_size": size,
                 "allocated_size": size, "active_size": size, "requested_size": size, "stream": 0,
                 "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
                 "frames": [], "blocks": [{"address": base + i * 2 * size, "size": size,
                                           "requested_size": size, "state": "active_allocated",
                                           "frames": []}]} for i in range(n)]
    return {"segments": segments, "device_traces": [trace]}


def alike_but_times(devices: int) -> dict:
    """`devices` devices with one allocation each, alike but for its time
    (device d's at d microseconds)."""
    return {"segments": [], "device_traces": [[entry(0, time_us=d)] for d in range(devices)]}


def released_ranges(n: int, size: int = 34 * MiB, big: int = 70 * MiB) -> dict:
    """`n` pairs of segments of `size`, the first of each pair freed and
    released by empty_cache(), then `n` requests of `big`: under other
    settings the simulation places segments by the model of the driver, and
    each new range looked through every small released range from the top."""
    base, trace, t = 0x7F0000000000, [], 0

    def add(action: str, addr: int, sz: int) -> None:
        nonlocal t
        trace.append(entry(t, action, sz, addr, t))
        t += 1

    slot = 128 * MiB
    for i in range(2 * n):
        addr = base - (i + 1) * slot
        add("segment_alloc", addr, size)
        add("alloc", addr, size)
    for i in range(0, 2 * n, 2):
        addr = base - (i + 1) * slot
        add("free_requested", addr, size)
        add("free_completed", addr, size)
        add("segment_free", addr, size)
    for i in range(n):
        addr = base - (2 * n + i + 1) * slot
        add("segment_alloc", addr, big)
        add("alloc", addr, big)
    return {"segments": [], "device_traces": [trace]}


def shared_device_memory(devices: int, references: int) -> dict:
    """`devices` devices of one allocation each and `references` references
    to one `memsight_device_memory` record (of device 0): every device
    scanned the whole list."""
    one = {"device": 0, "total": 80 << 30, "limit": -1}
    return {"segments": [], "device_traces": [[entry(0)] for _ in range(devices)],
            "memsight_device_memory": [one] * references}


def shared_storage_tag(devices: int, references: int) -> dict:
    """`devices` devices of one allocation each and `references` references
    to one tagged storage (memsight_tags, a parameter of device 0): every
    device read and scanned the whole list."""
    one = {"device": 0, "addr": 0, "size": 512, "category": "parameter", "name": "w",
           "module": "m"}
    return {"segments": [], "device_traces": [[entry(0)] for _ in range(devices)],
            "memsight_tags": {"storages": [one] * references}}


def stacks_and_devices(devices: int, stacks: int) -> dict:
    """Device 0 allocates from `stacks` distinct stacks (a frame of its own
    each: as many file and function names); `devices` - 1 more devices
    allocate once each, from one stack. The phase finder of every device
    kept a slot for every stack and string of the snapshot."""
    def frames(i: int) -> list:
        return [{"filename": f"f{i}.py", "name": f"n{i}", "line": 1}]
    first = [dict(entry(i), frames=frames(i)) for i in range(stacks)]
    one = frames(0)
    rest = [[dict(entry(0), frames=one)] for _ in range(devices - 1)]
    return {"segments": [], "device_traces": [first, *rest]}


def shared_segment(devices: int, references: int) -> dict:
    """`devices` devices of one allocation each and `references` references
    to one segment dict of device 0 (each a segment of the model): every
    device's replay scanned every segment of the snapshot."""
    one = {"device": 0, "address": 1 << 40, "total_size": 2 * MiB, "allocated_size": 0,
           "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
           "blocks": [{"address": 1 << 40, "size": 2 * MiB, "requested_size": 0,
                       "state": "inactive", "frames": []}]}
    return {"segments": [one] * references,
            "device_traces": [[entry(0)] for _ in range(devices)]}


def varied_layouts(layouts: int, rounds: int = 4) -> dict:
    """One device whose entries each have a key layout of their own: entry
    i carries, besides torch's keys, the extra keys k0..k16 whose bits are
    set in i % layouts (17 memoised strings, up to 131,072 layouts), the
    whole set of layouts repeated `rounds` times. Interning a layout looked
    through every layout before it: entries x layouts."""
    trace = []
    for r in range(rounds):
        for i in range(layouts):
            e = entry(r * layouts + i)
            e.update({f"k{b}": 0 for b in range(17) if i >> b & 1})
            trace.append(e)
    return {"segments": [], "device_traces": [trace]}


def permuted_fields(rows: int) -> dict:
    """One device whose entries give torch's fields in every order after
    "action" (5,040 orders of seven keys), in turn: the parallel decode's
    shares looked each order up among all they had met."""
    import itertools
    keys = ["addr", "size", "stream", "time_us", "frames", "compile_context", "user_metadata"]
    orders = list(itertools.permutations(keys))
    trace = []
    for i in range(rows):
        e = entry(i)
        values = dict(e, compile_context="", user_metadata="")
        trace.append({"action": "alloc", **{k: values[k] for k in orders[i % len(orders)]}})
    return {"segments": [], "device_traces": [trace]}


def many_top_level_keys(devices: int, keys: int) -> dict:
    """`devices` devices of one allocation each and `keys` unknown top-level
    keys (kept verbatim): each device's few lookups of allocator_settings,
    memsight_tags and the like scanned every key."""
    snap = {"segments": [], "device_traces": [[entry(0)] for _ in range(devices)]}
    snap.update({f"k{i}": 0 for i in range(keys)})
    return snap
