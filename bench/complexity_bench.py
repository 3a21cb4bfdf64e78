#!/usr/bin/env python3
"""How each command's time grows with what a snapshot holds: entries,
devices, annotations and segments, each scaled by 10x and 100x while the
others stay put (issue 34: every command O(n log n) or better in each);
and three shapes whose two counts grow together (devices with records of
memsight_device_memory and memsight_tags; devices with stacks; released
address ranges against new segments in whatif's model of the driver;
entries against their key layouts; devices against top-level keys).

    bench/complexity_bench.py [--memsight build/release/memsight] [--axes entries,devices,...]
                              [--commands summary,leaks,...] [--repeat 1]

Writes the inputs into bench/.data/complexity/ (built by
tests/cli/hostile_shapes.py and below), runs each command on the 1x, 10x
and 100x input and prints a Markdown table of the wall times (the best of
--repeat) and the ratio per 10x; the target is at most 15 (10 is linear).
Times under 50 ms are mostly the process's start, so their ratios say
little.
"""
import argparse
import pathlib
import pickle
import random
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cli"))
import hostile_shapes as shapes  # noqa: E402

DATA = ROOT / "bench" / ".data" / "complexity"
MiB = 1 << 20
FRAMES = [[{"name": f"f{j}", "filename": f"/work/train{j}.py", "line": j},
           {"name": "main", "filename": "/work/train.py", "line": 1}] for j in range(50)]


def entries(n):
    """One device: n allocations of 512 B to 4 MiB from 50 stacks, each
    freed after the next few (n * 3 trace entries)."""
    rng, trace, live = random.Random(1), [], []
    for i in range(n):
        size = rng.choice((512, 4096, MiB, 4 * MiB))
        trace.append({"action": "alloc", "addr": 0x7F0000000000 + i * 8 * MiB, "size": size,
                      "stream": 0, "time_us": 3 * i, "frames": FRAMES[i % 50]})
        live.append(trace[-1])
        if len(live) > 4:
            a = live.pop(0)
            for act in ("free_requested", "free_completed"):
                trace.append(dict(a, action=act, time_us=3 * i + 1))
    return {"segments": [], "device_traces": [trace]}


def devices(n):
    """n devices of two allocations each (their times apart)."""
    return {"segments": [], "device_traces": [
        [dict(shapes.entry(0, time_us=10 * d), frames=FRAMES[d % 50]),
         dict(shapes.entry(1, time_us=10 * d + 1), frames=FRAMES[(d + 1) % 50])]
        for d in range(n)]}


def annotations(n):
    """100 devices of 20 allocations each and n profiler-step annotations
    spread over them, plus n references to one shared annotation."""
    snap = devices(100)
    for d, trace in enumerate(snap["device_traces"]):
        trace[:] = [dict(shapes.entry(i, time_us=i * 1000), frames=FRAMES[i % 50]) for i in range(20)]
    notes = [shapes.annotation(f"ProfilerStep#{i}", i % 100, (i // 100) * 17) for i in range(n)]
    snap["external_annotations"] = notes + [shapes.annotation("ProfilerStep#0")] * n
    return snap


def segments(n):
    """n requests of 12 MiB never freed, half recorded with their segment
    events (the simulation follows torch's addresses) and half without
    (it places each new segment itself)."""
    snap = shapes.live_segments(n // 2)
    trace = snap["device_traces"][0]
    t = len(trace)
    trace += [{"action": "alloc", "addr": (1 << 45) + (i << 26), "size": 12 * MiB, "stream": 0,
               "time_us": t + i} for i in range(n - n // 2)]
    return snap


def device_records(n):
    """n devices and 10n references to one memsight_device_memory record
    and to one tagged storage: both counts grow together, so a scan of
    either list per device grows 100x per 10x."""
    snap = shapes.shared_device_memory(n, 10 * n)
    snap["memsight_tags"] = shapes.shared_storage_tag(1, 10 * n)["memsight_tags"]
    return snap


AXES = {"entries": (entries, 1000), "devices": (devices, 100),
        "annotations": (annotations, 1000), "segments": (segments, 300),
        "device_records": (device_records, 100),
        "stacks": (lambda n: shapes.stacks_and_devices(n // 10, n), 1000),
        "released": (shapes.released_ranges, 300),
        "layouts": (lambda n: shapes.varied_layouts(n, 2), 600),
        "top_keys": (lambda n: shapes.many_top_level_keys(n // 20, n), 2000)}
COMMANDS = {"summary": ["summary"], "leaks": ["leaks"], "view": ["view", "-o", "/dev/null"],
            "ranks": ["ranks"], "whatif": ["whatif"],
            "whatif-expandable": ["whatif", "--set", "expandable_segments:True"], "diff": ["diff", "--at", "0"],
            "trace": ["trace"], "segments": ["segments", "-o", "-"], "stats": ["stats"]}


def timed(binary, cmd, f, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run([binary, cmd[0], str(f), *cmd[1:]], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=600)
        dt = time.perf_counter() - t0
        if r.returncode:
            return None, r.stderr.decode(errors="replace").strip().splitlines()[-1][:60]
        best = dt if best is None else min(best, dt)
    return best, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memsight", default=str(ROOT / "build" / "release" / "memsight"))
    ap.add_argument("--axes", default=",".join(AXES))
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    print("| axis | sizes | command | 1x s | 10x s | 100x s | 10x / 1x | 100x / 10x |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for axis in args.axes.split(","):
        build, base = AXES[axis]
        files = []
        for k in (1, 10, 100):
            f = DATA / f"{axis}_{base * k}.pickle"
            if not f.exists():
                with open(f, "wb") as out:
                    pickle.dump(build(base * k), out, protocol=4)
            files.append(f)
        for name in args.commands.split(","):
            times, err = [], None
            for f in files:
                t, err = timed(args.memsight, COMMANDS[name], f, args.repeat)
                if err:
                    break
                times.append(t)
            if err:
                print(f"| {axis} | | {name} | {err} | | | | |", flush=True)
                continue
            r1, r2 = times[1] / times[0], times[2] / times[1]
            print(f"| {axis} | {base:,} / {base * 10:,} / {base * 100:,} | {name} | "
                  f"{times[0]:.3f} | {times[1]:.3f} | {times[2]:.3f} | {r1:.1f} | {r2:.1f} |",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
