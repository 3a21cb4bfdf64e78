#!/usr/bin/env python3
"""`memsight leaks` and `memsight diff` against `memsight summary` on the same
files: the 856,152-entry snapshot and a 10x copy.

    bench/diff_leaks_bench.py [--memsight build/release/memsight] [--repeat 5] [--data /tmp/memsight-bench]

The inputs are made in --data (outside the repository) when missing: the
fixture ../shared/fixtures/large/large.pickle.xz decompressed, and a copy ten
times longer made by ../shared/tools/scale_snapshot.py. Runs alternate
between the command and `summary` so both see the same machine load; each
row reports the median wall time (with process start) and the child's peak
RSS. `diff A B` reads two files, so it is set against `summary` of both (one
after the other: the sum of the two medians, the larger RSS) and, for the
record, against one. Target (bench/README.md): within 2x of summary on the
same files, time and peak RSS; exits 1 when a row misses it.
"""
import argparse
import lzma
import pathlib
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from engine_bench import run_rss, warm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def inputs(data: pathlib.Path) -> list[pathlib.Path]:
    data.mkdir(parents=True, exist_ok=True)
    large = data / "large.pickle"
    if not large.exists():
        with lzma.open(SHARED / "fixtures" / "large" / "large.pickle.xz") as f, open(large, "wb") as out:
            shutil.copyfileobj(f, out)
    scaled = data / "large_x10.pickle"
    if not scaled.exists():
        subprocess.run([sys.executable, str(SHARED / "tools" / "scale_snapshot.py"), str(large), str(scaled), "10"],
                       check=True, stdout=subprocess.DEVNULL)
    return [large, scaled]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memsight", default=str(ROOT / "build" / "release" / "memsight"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data", default="/tmp/memsight-bench", help="where the inputs are (made if missing)")
    args = ap.parse_args()
    exe = args.memsight
    print("| input | command | median s | summary median s | time ratio | peak RSS | summary peak RSS | RSS ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for f in inputs(pathlib.Path(args.data)):
        warm(f)
        commands = [
            (["leaks", str(f)], 1),
            (["diff", str(f), "--at-step", "150"], 1),
            (["diff", str(f), "--at", "peak"], 1),
            (["diff", str(f), str(f)], 2),
        ]
        for cmd, files in commands:
            times, base = [], []
            rss = base_rss = 0
            for _ in range(args.repeat):
                wall, peak = run_rss([exe, *cmd])
                times.append(wall)
                rss = max(rss, peak)
                wall, peak = run_rss([exe, "summary", str(f)])
                base.append(wall)
                base_rss = max(base_rss, peak)
            t, b = statistics.median(times), statistics.median(base)
            label = " ".join(["diff", f.name, f.name] if files == 2 else [cmd[0], f.name, *cmd[2:]])
            for n in sorted({1, files}, reverse=True):
                ratio, rss_ratio = t / (n * b), rss / base_rss
                if n == files:
                    worst = max(worst, ratio, rss_ratio)
                against = f"{n} x {b:.3f}" if n > 1 else f"{b:.3f}"
                print(f"| {f.name} | `{label}` | {t:.3f} | {against} | {ratio:.2f}x | {rss / 2**20:.1f} MiB | "
                      f"{base_rss / 2**20:.1f} MiB | {rss_ratio:.2f}x |")
    print(f"\nworst ratio against summary on the same files: {worst:.2f}x (target: at most 2x)")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
