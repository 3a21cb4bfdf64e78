#!/usr/bin/env python3
"""Side-by-side timing of memsight against pickle.load, the floor under every
torch tool (each starts by unpickling the snapshot).

    bench/engine_bench.py [--memsight build/release/memsight] [--repeat 5] [--scale 10]
                          [--baseline OTHER/memsight] [--cpu]

Uses ../shared/fixtures/large/large.pickle.xz (856,152 trace entries),
decompressed once into bench/.data/, and a K-times copy made with
../shared/tools/scale_snapshot.py. For every command it reports the median
wall time over --repeat runs, alternating memsight and Python runs so both
see the same machine load, the ratio, and peak RSS (getrusage of the child).
Prints a Markdown table for bench/README.md. With --baseline, another
memsight build (the one before a change) runs in the same rotation, and the
table adds its median, its peak RSS and the ratio of the two. With --cpu,
memsight's median user and system CPU seconds too. MEMSIGHT_THREADS in the
environment reaches memsight (=1: one thread).
"""
import argparse
import lzma
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = ROOT / "bench" / ".data"


def run_rss(cmd, cpu=None):
    """Wall seconds and peak RSS in bytes, measured with wait4; appends the
    child's (user, system) CPU seconds to `cpu` when given."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"{cmd}: failed with status {status}: {p.stderr.read().decode()[-500:]}")
    if cpu is not None:
        cpu.append((usage.ru_utime, usage.ru_stime))
    return wall, usage.ru_maxrss * 1024


def warm(path):
    """Reads the file once so every timed run finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


# A fresh process pages in 64 MiB of anonymous memory, a byte a page, and
# prints the milliseconds a MiB took, then the same for pages it already
# has. On a VM the first can cost 20-50 times what the bytes do (the host
# backs the guest's pages lazily, and takes back what the guest frees), and
# it moves from day to day: memsight's reads write tens of MiB of fresh
# columns, pickle.load hundreds of MiB of objects.
TOUCH = """
import mmap, time
n = 64 << 20
m = mmap.mmap(-1, n)
for k in range(2):
    t = time.perf_counter()
    for i in range(0, n, 4096):
        m[i] = 1
    print((time.perf_counter() - t) * 1e3 / 64, end=" ")
"""


def first_touch(python, after=None):
    """(fresh, paged) ms per MiB, in a new process; `after` runs just before."""
    if after:
        subprocess.run(after, stdout=subprocess.DEVNULL, check=True)
    out = subprocess.run([python, "-c", TOUCH], capture_output=True, text=True, check=True)
    fresh, paged = map(float, out.stdout.split())
    return fresh, paged


def prepare(scale, source=None):
    DATA.mkdir(parents=True, exist_ok=True)
    large = DATA / "large.pickle"
    if not large.exists():
        src = source or SHARED / "fixtures" / "large" / "large.pickle.xz"
        with lzma.open(src) as f, open(large, "wb") as out:
            shutil.copyfileobj(f, out)
    files = [large]
    if scale > 1:
        scaled = DATA / f"large_x{scale}.pickle"
        if not scaled.exists():
            subprocess.run([sys.executable, str(SHARED / "tools" / "scale_snapshot.py"),
                            str(large), str(scaled), str(scale)], check=True,
                           stdout=subprocess.DEVNULL)
        files.append(scaled)
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memsight", default=str(ROOT / "build" / "release" / "memsight"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--commands", default="stats,memory,summary,trace,view")
    ap.add_argument("--scaled-repeat", type=int, default=1,
                    help="repeats on the scaled copy (pickle.load of it takes ~20 s)")
    ap.add_argument("--baseline", default=None,
                    help="another memsight binary to time in the same rotation (before/after)")
    ap.add_argument("--cpu", action="store_true",
                    help="add memsight's CPU time (median user and system seconds): what "
                         "more cores cannot take off, and the page faults")
    ap.add_argument("--large", type=pathlib.Path, default=None,
                    help="large.pickle.xz (default: ../shared/fixtures/large/large.pickle.xz)")
    args = ap.parse_args()
    files = prepare(args.scale, args.large)
    commands = args.commands.split(",")
    print(f"machine: {os.cpu_count()} cpus; memsight: {args.memsight}; repeats: {args.repeat}")
    quiet = statistics.median(first_touch(args.python)[0] for _ in range(5))
    load = [args.python, "-c", f"import pickle; pickle.load(open({str(files[0])!r}, 'rb'))"]
    fresh, paged = first_touch(args.python, after=load)
    print(f"fresh memory: {quiet:.2f} ms/MiB to page in (median of 5), {fresh:.2f} ms/MiB right after "
          f"a pickle.load, {paged:.3f} ms/MiB to write once paged in\n")
    cpu_cols = " memsight user s | memsight system s |" if args.cpu else ""
    base_cols = " baseline (median s) | baseline peak RSS | baseline / memsight |" if args.baseline else ""
    print("| input | size | command | memsight (median s) | pickle.load (median s) | ratio | "
          "memsight peak RSS | RSS / file |" + cpu_cols + base_cols)
    print("| --- " * (8 + (2 if args.cpu else 0) + (3 if args.baseline else 0)) + "|")
    for f in files:
        size = f.stat().st_size
        warm(f)
        py_cmd = [args.python, "-c", f"import pickle; pickle.load(open({str(f)!r}, 'rb'))"]
        for c in commands:
            out = {"stats": [], "memory": ["-o", "/dev/null"], "summary": [], "trace": [],
                   "view": ["-o", "/dev/null"],
                   "convert": ["-o", str(DATA / "convert-out.pickle")]}[c]
            ms, py, bs, cpu, rss, brss = [], [], [], [], 0, 0
            repeat = args.repeat if f == files[0] else args.scaled_repeat
            for _ in range(repeat):  # alternate so all see the same load
                w, r = run_rss([args.memsight, c, str(f), *out], cpu)
                ms.append(w)
                rss = max(rss, r)
                py.append(run_rss(py_cmd)[0])
                if args.baseline:
                    w, r = run_rss([args.baseline, c, str(f), *out])
                    bs.append(w)
                    brss = max(brss, r)
            m, p = statistics.median(ms), statistics.median(py)
            row = (f"| {f.name} | {size / 1e6:.1f} MB | {c} | {m:.3f} | {p:.3f} | {p / m:.1f}x "
                   f"| {rss / 1e6:.1f} MB | {rss / size:.2f} |")
            if args.cpu:
                row += "".join(f" {statistics.median(u[k] for u in cpu):.3f} |" for k in (0, 1))
            if args.baseline:
                b = statistics.median(bs)
                row += f" {b:.3f} | {brss / 1e6:.1f} MB | {b / m:.2f}x |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
