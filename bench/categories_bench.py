#!/usr/bin/env python3
"""What classifying every block (memory kinds, docs/summary.md) adds to
`memsight summary` and `memsight view`: this build against a build of the
same engine without the classifier, on the 856,152-entry snapshot.

    bench/categories_bench.py --baseline /path/to/memsight-before [--memsight build/release/memsight] [--repeat 9]

Build the baseline from the commit before the classifier (a78defa):
    git archive a78defa | tar -x -C /tmp/base && cmake -S /tmp/base -B /tmp/base/build -G Ninja \\
        -DCMAKE_BUILD_TYPE=Release -DMEMSIGHT_TESTS=OFF -DMEMSIGHT_PYTHON=OFF && cmake --build /tmp/base/build

Runs alternate between the two binaries so both see the same machine load;
reports the median wall time of each, the added share, and peak RSS.
Target (bench/README.md): classification adds at most 25% to `summary`.
"""
import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from engine_bench import prepare, run_rss, warm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memsight", default=str(ROOT / "build" / "release" / "memsight"))
    ap.add_argument("--baseline", required=True, help="memsight built without the classifier")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--source", help="the decompressed large.pickle (else bench/.data, made from ../shared/fixtures)")
    args = ap.parse_args()
    large = pathlib.Path(args.source) if args.source else prepare(1)[0]
    warm(large)
    print("| command | without (median s) | with (median s) | added | peak RSS without / with |")
    print("| --- | --- | --- | --- | --- |")
    worst = 0.0
    for cmd in (["summary"], ["summary", "--json"], ["view", "-o", "/dev/null"]):
        times = {"base": [], "new": []}
        rss = {"base": 0, "new": 0}
        for _ in range(args.repeat):
            for key, exe in (("base", args.baseline), ("new", args.memsight)):
                wall, peak = run_rss([exe, cmd[0], str(large), *cmd[1:]])
                times[key].append(wall)
                rss[key] = max(rss[key], peak)
        base, new = statistics.median(times["base"]), statistics.median(times["new"])
        added = new / base - 1
        if cmd[0] == "summary":
            worst = max(worst, added)
        print(f"| {' '.join(cmd)} | {base:.3f} | {new:.3f} | {added * 100:+.1f}% | "
              f"{rss['base'] / 2**20:.1f} / {rss['new'] / 2**20:.1f} MiB |")
    print(f"\nsummary: classification adds {worst * 100:.1f}% (target: at most 25%)")
    return 0 if worst <= 0.25 else 1


if __name__ == "__main__":
    sys.exit(main())
