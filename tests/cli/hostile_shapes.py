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
