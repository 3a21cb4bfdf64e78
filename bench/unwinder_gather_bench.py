"""The native unwinder's cost a stack, on any machine with g++ and CPython 3.11/3.12 (issue 37).

Builds memsight's Python unwinder with the stand-in of torch's interface
that its tests use (tests/python/native_stub/), then, from a Python call
chain DEPTH frames deep, gathers the stack N times the way torch's
allocator does at each event, keeping the last RING tracebacks alive as
torch's ring buffer does. Modes, alternating over rounds:

  reference   the stand-in's unwinder that reads frames through the C API with
              the GIL held, as torch's own does (a frame object for each frame,
              a reference to each code object)
  frames      memsight's unwinder, each event a copy of every frame
  ids         memsight's unwinder, each event one frame standing for the whole
              stack (stack ids: the default)
  frames-w, ids-w   the same built as if code objects' deaths were watched (3.12's
              code watchers): a hit reads no code object. On 3.11 this build is
              for measuring only (a dead code object would go unseen)

Each is timed with nothing between gathers and with --pollute KiB of other
memory written between gathers (a training step's other work evicts what
the unwinder reads from the caches; that is why a step's cost an event is
larger than a hot loop's). Only gather and the oldest traceback's
destruction are timed. On 3.11 memsight's unwinder compares each hit's code
objects; from 3.12 code watchers spare that (the GPU machine's case).

    python3 bench/unwinder_gather_bench.py [--depth 80] [--n 5000] [--rounds 3] [--pollute 4096]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "python" / "memsight" / "torch" / "native" / "python_unwinder.cpp"
STUB = ROOT / "tests" / "python" / "native_stub"
MODES = ["reference", "frames", "ids", "frames-w", "ids-w"]


def build(out: Path, *defines: str) -> ctypes.CDLL:
    include = sysconfig.get_paths()["include"]
    cmd = ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{STUB}", f"-I{include}",
           *[f"-D{d}" for d in defines], str(SOURCE), str(STUB / "unwinder_harness.cpp"), "-o", str(out),
           "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"unwinder_gather_bench.py: the build failed:\n{r.stderr}")
    lib = ctypes.CDLL(str(out))
    lib.memsight_harness_gather_ns.restype = ctypes.c_longlong
    lib.memsight_harness_gather_ns.argtypes = [ctypes.c_int] * 3
    lib.memsight_unwinder_enable.argtypes = [ctypes.c_int]
    lib.memsight_unwinder_compact.argtypes = [ctypes.c_int]
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=80, help="Python frames above each gather")
    ap.add_argument("--n", type=int, default=5000, help="gathers a mode and round")
    ap.add_argument("--ring", type=int, default=20000, help="tracebacks kept alive, as torch's max_entries")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pollute", type=int, default=4096, help="KiB of other memory written between gathers")
    args = ap.parse_args(argv)
    if not ((3, 11) <= sys.version_info[:2] <= (3, 12)):
        print("unwinder_gather_bench.py: the unwinder reads CPython 3.11/3.12 frames", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        plain = build(Path(tmp) / "unwinder.so")
        watched = build(Path(tmp) / "unwinder_watched.so", "MEMSIGHT_BENCH_ASSUME_WATCHED")

    def at_depth(lib: ctypes.CDLL, k: int, pollute: int) -> int:
        if k:
            return at_depth(lib, k - 1, pollute)
        return lib.memsight_harness_gather_ns(args.n, args.ring, pollute)

    def run(mode: str, pollute: int) -> float:
        lib = watched if mode.endswith("-w") else plain
        lib.memsight_unwinder_enable(0 if mode == "reference" else 1)
        lib.memsight_unwinder_compact(1 if mode.startswith("ids") else 0)
        try:
            at_depth(lib, args.depth, 0)  # the stack resolved once, the ring full
            return at_depth(lib, args.depth, pollute) / args.n
        finally:
            lib.memsight_unwinder_enable(0)

    print(f"Python {sys.version.split()[0]}: {args.depth} frames deep, {args.n} gathers a mode and round, "
          f"{args.rounds} rounds, ring {args.ring}; ns a gather (median; min-max)")
    for pollute in (0, args.pollute):
        per: dict[str, list[float]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            for m in MODES[r % len(MODES):] + MODES[: r % len(MODES)]:
                per[m].append(run(m, pollute))
        print(f"  {pollute} KiB between gathers:")
        for m, v in per.items():
            print(f"    {m:<10} {statistics.median(v):7.0f} ({min(v):.0f}-{max(v):.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
