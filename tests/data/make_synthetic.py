"""Writes synthetic_two_devices.pickle.gz: a snapshot shaped like torch's,
big enough (several pickle frames) for the parallel trace decode, with
what makes it hard: two devices, an action name, frames and strings first
seen deep in the trace and read back later, frames lists shared between
entries, and an OOM entry (device_free) near the end.

synthetic_mixed_kinds.pickle.gz is the same with one more oddity deep in
the trace: an entry whose "frames" is a memo read of a string that an
entry just before stored as its compile_context.

    python3 tests/data/make_synthetic.py
"""
import gzip
import pathlib
import pickle
import random

rng = random.Random(7)
frames = [{"name": f"fn_{i}", "filename": f"/src/pkg/mod_{i % 11}.py", "line": 10 + i}
          for i in range(400)]
ODD = "".join(["odd", "_string"])  # one str object, memoised once
shared_stacks = [[frames[(i * 13 + j) % 200] for j in range(1 + i % 6)] for i in range(50)]


def entry(i, base, mixed):
    late = i > 9000  # frames 200-399 and some strings appear only from here on
    action = rng.choice(["alloc", "free_requested", "free_completed"])
    if i % 997 == 0:
        action = "segment_map" if late else "segment_alloc"
    if i % 3 == 0:
        stack = shared_stacks[i % 50]  # the same list object: memo reads
    else:
        lo = 200 if late else 0
        stack = [frames[lo + (i * 7 + j) % 200] for j in range(1 + i % 5)]
    mixed = mixed and base == 0x7F0000000000  # device 0 only
    if mixed and i == 12345:
        return {"action": "alloc", "addr": base, "size": 512, "stream": 0, "time_us": 0,
                "compile_context": ODD, "user_metadata": "", "frames": []}
    if mixed and i == 12346:
        return {"action": "alloc", "addr": base, "size": 512, "stream": 0, "time_us": 0,
                "compile_context": "N/A", "user_metadata": "", "frames": ODD}
    return {"action": action, "addr": base + (i % 700) * 2**20, "size": 512 * (1 + i % 37),
            "stream": 0 if i % 5 else 7, "time_us": 1_795_000_000_000_000 + 3 * i,
            "compile_context": "N/A" if not late or i % 4 else f"ctx_{i % 3}",
            "user_metadata": "", "frames": stack}




def write(name, mixed):
    rng.seed(7)
    traces = []
    for d, base in enumerate([0x7F0000000000, 0x7E0000000000]):
        t = [entry(i, base, mixed) for i in range(14000)]
        traces.append(t)
    traces[1].append({"action": "oom", "device_free": 123 * 2**20, "size": 2**30, "stream": 0,
                      "time_us": 1_795_000_000_100_000, "compile_context": "N/A",
                      "user_metadata": "", "frames": shared_stacks[3]})
    segments = []
    for d, base in enumerate([0x7F0000000000, 0x7E0000000000]):
        blocks = [{"address": base, "size": 2**20, "requested_size": 2**20 - 512,
                   "state": "active_allocated", "frames": shared_stacks[1]},
                  {"address": base + 2**20, "size": 2**20, "requested_size": 0,
                   "state": "inactive", "frames": []}]
        segments.append({"device": d, "address": base, "total_size": 2**21, "allocated_size": 2**20,
                         "active_size": 2**20, "requested_size": 2**20 - 512, "stream": 0,
                         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
                         "frames": [], "blocks": blocks})
    snapshot = {"segments": segments, "device_traces": traces,
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""}}
    out = pathlib.Path(__file__).with_name(name + ".pickle.gz")
    out.write_bytes(gzip.compress(pickle.dumps(snapshot, protocol=4), mtime=0))
    print(out, out.stat().st_size)


write("synthetic_two_devices", False)
write("synthetic_mixed_kinds", True)
