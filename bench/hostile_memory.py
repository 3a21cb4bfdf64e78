#!/usr/bin/env python3
"""Peak memory of every snapshot command on inputs built to multiply it:
values the pickle refers to many times through its memo, many alike
devices, many small containers, a trace whose allocations are never freed.

    bench/hostile_memory.py [--memsight build/release/memsight] [--baseline OTHER/memsight]
                            [--only NAME,...] [--commands leaks,diff,...] [--big] [--limit-gb 8]

Writes the inputs into bench/.data/hostile/ (a few MB each; --big adds the
105 MB one and the 16 MB trace), runs each command once per binary under an
address-space limit (a run past it reads "out of memory"; `diff` compares
the state after the first trace entry with the end), and prints a
Markdown table: peak RSS (wait4 of the child), wall time, output size
and bytes of memory per byte of pickle. docs/snapshot-format.md
(#hostile-input) states the bound these are checked against.
"""
import argparse
import os
import pathlib
import pickle
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cli"))
import hostile_shapes as shapes  # noqa: E402
DATA = ROOT / "bench" / ".data" / "hostile"
KiB, MiB = 1 << 10, 1 << 20
LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""
# diff compares the state after the first trace entry with the snapshot's
# end: every allocation after it has appeared, each stack once.
COMMANDS = [["stats"], ["trace"], ["segments", "-o", "-"], ["memory", "-o", "-"], ["summary"],
            ["summary", "--json"], ["view", "-o", "OUT.html"], ["convert", "-o", "OUT.pickle"],
            ["leaks"], ["leaks", "--json"], ["diff", "--at", "0"], ["diff", "--at", "0", "--json"],
            ["diff", "--at", "0", "-o", "OUT.folded"], ["diff", "--at", "0", "-o", "OUT.svg"],
            ["whatif"]]


def entry(i, frames):
    return {"action": "alloc", "addr": 4096 * i, "size": 512, "stream": 0, "time_us": i,
            "frames": frames}


def segment(i, frames, block_frames):
    a = (1 << 30) + (i << 20)
    return {"device": 0, "address": a, "total_size": MiB, "allocated_size": 512,
            "active_size": 512, "requested_size": 512, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
            "blocks": [{"address": a, "size": 512, "requested_size": 512,
                        "state": "active_allocated", "frames": block_frames},
                       {"address": a + 512, "size": MiB - 512, "requested_size": 0,
                        "state": "inactive"}]}


def inputs(big):
    """name -> (description, builder of the pickled object)."""
    one = "f" * MiB
    fr = [{"name": f"n{j}", "filename": f"/very/long/path/to/some/module/file{j}.py", "line": j}
          for j in range(1000)]
    nested = ["x"]
    for _ in range(24):
        nested = [nested, nested]
    out = {
        "memo_name": ("1000 entries, each frame naming one 1 MiB file", lambda: {
            "segments": [], "device_traces": [[entry(i, [{"name": "f", "filename": one, "line": i}])
                                               for i in range(1000)]]}),
        "memo_extras": ("entries, frames and 100 keys sharing one 1 MiB string", lambda: dict(
            {"segments": [], "device_traces": [[dict(entry(i, [{"name": "f", "filename": "a.py",
                                                                "line": i, "fx_node_op": one}]),
                                                     note=one) for i in range(1000)]]},
            **{f"k{i}": one for i in range(100)})),
        "nested": ("2^24 nested references to one list", lambda: {
            "segments": [], "device_traces": [[]], "lol": nested}),
        "shared_frames": ("3000 segments whose blocks and entries share one 1000-frame list",
                          lambda: {"segments": [segment(i, fr, fr) for i in range(3000)],
                                   "device_traces": [[entry(i, fr) for i in range(3000)]]}),
        "memo_blocks": ("200 blocks, each frame naming one 1 MiB file", lambda: {
            "segments": [segment(i, [], [{"name": "g", "filename": one, "line": i}])
                         for i in range(200)], "device_traces": [[]]}),
        "devices": ("100,000 devices of one allocation each", lambda: {
            "segments": [], "device_traces": [[entry(1, [])] for _ in range(100_000)]}),
        "lists": ("2 million memoised empty lists", lambda: {
            "segments": [], "device_traces": [[]], "x": [[] for _ in range(2_000_000)]}),
        "shared_annotation": ("2 million references to one annotation dict",
                              lambda: shapes.shared_annotation(1, 2_000_000)),
        "devices_annotation": ("10,000 devices and a million references to one annotation",
                               lambda: shapes.shared_annotation(10_000, 1_000_000)),
        "alike_times": ("100,000 devices alike but for their times",
                        lambda: shapes.alike_but_times(100_000)),
        "devices_device_memory": ("10,000 devices and a million references to one device-memory "
                                  "record", lambda: shapes.shared_device_memory(10_000, 1_000_000)),
        "devices_tags": ("10,000 devices and a million references to one storage tag",
                         lambda: shapes.shared_storage_tag(10_000, 1_000_000)),
        "stacks_devices": ("3,000 devices and 200,000 stacks",
                           lambda: shapes.stacks_and_devices(3000, 200_000)),
        "released_ranges": ("30,000 released ranges, then 30,000 larger segments",
                            lambda: shapes.released_ranges(30_000)),
    }
    if big:
        huge = "f" * (100 * MiB)
        out["memo_huge"] = ("50 entries naming one 100 MiB file", lambda: {
            "segments": [], "device_traces": [[entry(i, [{"name": "f", "filename": huge,
                                                          "line": i}]) for i in range(50)]]})
        out["never_freed"] = ("600,000 allocations never freed", lambda: {
            "segments": [], "device_traces": [[{"action": "alloc", "addr": i, "size": 1,
                                                "stream": 0, "time_us": 0}
                                               for i in range(600_000)]]})
    return out


def measure(binary, cmd, f, limit):
    out = DATA / "out"
    args = [str(DATA / a.replace("OUT", "out")) if a.startswith("OUT") else a for a in cmd]

    # A small fresh Python forks and runs the command (as
    # tests/cli/test_bounded_memory.py does): a child of this process would
    # count this process's pages in its peak (Linux keeps it across exec). A
    # shell sets the limit, then becomes memsight.
    err_path, rss_path = DATA / "err", DATA / "rss"
    written = pathlib.Path(args[-1]) if args[-1].startswith(str(DATA)) else out
    written.unlink(missing_ok=True)  # a failed run writes nothing: no size of an earlier one
    limited = ["/bin/sh", "-c", f'ulimit -v {limit // 1024}; exec "$0" "$@"', binary]
    t0 = time.perf_counter()
    with open(out, "wb") as o, open(err_path, "wb") as e:
        subprocess.run([sys.executable, "-c", LAUNCH, str(rss_path), *limited, args[0], str(f),
                        *args[1:]], stdout=o, stderr=e, check=True)
    status, kib = map(int, rss_path.read_text().split())
    wall = time.perf_counter() - t0
    err = err_path.read_text(errors="replace").strip()
    size = written.stat().st_size if written.exists() else 0
    return kib * 1024, wall, size, (err.splitlines()[-1][:60] if status else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memsight", default=str(ROOT / "build" / "release" / "memsight"))
    ap.add_argument("--baseline", default=None, help="another memsight binary (before a change)")
    ap.add_argument("--only", default="", help="comma-separated input names")
    ap.add_argument("--commands", default="", help="comma-separated commands (stats,leaks,diff,...)")
    ap.add_argument("--big", action="store_true", help="add the 105 MB and 16 MB inputs")
    ap.add_argument("--limit-gb", type=float, default=8, help="address-space limit of each run")
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    limit = int(args.limit_gb * (1 << 30))
    todo = inputs(args.big)
    if args.only:
        todo = {k: v for k, v in todo.items() if k in args.only.split(",")}
    binaries = [("memsight", args.memsight)] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"machine: {os.cpu_count()} cpus; limit {args.limit_gb} GB a run\n")
    head = "| input | pickle | command |" + "".join(
        f" {n} peak RSS | {n} s | {n} output | {n} RSS / pickle |" for n, _ in binaries)
    print(head)
    print("| --- " * (3 + 4 * len(binaries)) + "|")
    for name, (what, build) in todo.items():
        f = DATA / f"{name}.pickle"
        if not f.exists():
            with open(f, "wb") as out:
                pickle.dump(build(), out, protocol=4)
        size = f.stat().st_size
        for cmd in COMMANDS:
            if args.commands and cmd[0] not in args.commands.split(","):
                continue
            shown_cmd = " ".join(c.replace("OUT", "") for c in cmd)
            row = f"| {what} | {size / 1e6:.2f} MB | {shown_cmd} |"
            for _, b in binaries:
                rss, wall, out, err = measure(b, cmd, f, limit)
                shown = f"{rss / 1e6:.1f} MB" if not err else f"{rss / 1e6:.1f} MB ({err})"
                row += f" {shown} | {wall:.2f} | {out / 1e6:.2f} MB | {rss / size:.1f} |"
            print(row, flush=True)


if __name__ == "__main__":
    sys.exit(main())
