"""Every command's text and JSON on every fixture, pinned byte for byte.

The engine's layout changes (rooms, libraries, one JSON writer) must leave
what users read unchanged; these files are what it read before. A case is
a command line run from the repository's root; its golden file holds the
exit status, standard output and standard error.

    python3 tests/golden/cases.py            # compare, list what differs
    python3 tests/golden/cases.py --update   # write the golden files anew

tests/cli/test_golden_outputs.py runs the same comparison under pytest.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "out"
DATA = "tests/data"
LARGE = ROOT.parent / "shared" / "fixtures" / "large" / "large.pickle.xz"

# Snapshots of tests/data (../shared/fixtures/snapshots holds the same bytes
# for the five it has).
SNAPSHOTS = sorted(
    str(p.relative_to(ROOT))
    for pattern in ("*.pickle", "*.pickle.gz", "counters/*.pickle")
    for p in (ROOT / DATA).glob(pattern)
)
# Those whose torch text is pinned against torch's own elsewhere
# (tests/data/NAME.{stats.txt,trace.txt,...}).
TORCH_PINNED = {str(p.with_suffix(".pickle").relative_to(ROOT))
                for p in (ROOT / DATA).glob("*.stats.txt")}


def _name(path: str) -> str:
    return path.removeprefix(DATA + "/").replace("/", "_")


def cases() -> dict[str, list[str]]:
    """Case name -> the command's arguments."""
    out: dict[str, list[str]] = {}
    for snap in SNAPSHOTS:
        n = _name(snap)
        out[f"{n}.summary"] = ["summary", snap]
        out[f"{n}.summary.json"] = ["summary", snap, "--json"]
        out[f"{n}.summary.frames"] = ["summary", snap, "--frames", "all"]
        out[f"{n}.leaks"] = ["leaks", snap]
        out[f"{n}.leaks.json"] = ["leaks", snap, "--json"]
        out[f"{n}.whatif"] = ["whatif", snap]
        out[f"{n}.whatif.json"] = ["whatif", snap, "--json"]
        out[f"{n}.whatif.expandable"] = ["whatif", snap, "--set", "expandable_segments:True"]
        out[f"{n}.whatif.expandable.json"] = [
            "whatif", snap, "--set", "expandable_segments:True", "--json"]
        out[f"{n}.diff.peak"] = ["diff", snap, "--at", "peak"]
        out[f"{n}.diff.peak.json"] = ["diff", snap, "--at", "peak", "--json"]
        out[f"{n}.diff.step"] = ["diff", snap, "--at-step", "2"]
        out[f"{n}.ranks.json"] = ["ranks", snap, "--json"]
        if snap not in TORCH_PINNED:
            out[f"{n}.stats"] = ["stats", snap]
            if not snap.endswith(".gz"):  # the synthetic ones' logs are 0.8 MB each
                out[f"{n}.trace"] = ["trace", snap]
            out[f"{n}.segments.folded"] = ["segments", snap, "-o", "-"]
            out[f"{n}.memory.folded"] = ["memory", snap, "-o", "-"]
    pairs = [("mlp_train", "transformer_train"), ("oom", "oom_observer"),
             ("counters/fsdp2_rank0", "counters/fsdp2_rank1")]
    for a, b in pairs:
        pa, pb = f"{DATA}/{a}.pickle", f"{DATA}/{b}.pickle"
        n = f"{_name(pa)}-{_name(pb)}"
        out[f"{n}.diff"] = ["diff", pa, pb, "--allow-mismatch"]
        out[f"{n}.diff.json"] = ["diff", pa, pb, "--allow-mismatch", "--json"]
        out[f"{n}.compare"] = ["compare", pa, pb, "-o", "-"]
        out[f"{n}.ranks"] = ["ranks", pa, pb]
        out[f"{n}.ranks.json"] = ["ranks", pa, pb, "--json"]
    out["ranks.counters"] = ["ranks", f"{DATA}/counters"]
    out["ranks.counters.json"] = ["ranks", f"{DATA}/counters", "--json"]
    trace = f"{DATA}/profiler/profiler.pt.trace.json.gz"
    out["profile"] = ["profile", trace]
    out["profile.json"] = ["profile", trace, "--json"]
    if LARGE.exists():
        large = os.path.relpath(LARGE, ROOT)
        out["large.summary"] = ["summary", large]
        out["large.summary.json"] = ["summary", large, "--json"]
        out["large.leaks"] = ["leaks", large]
        out["large.leaks.json"] = ["leaks", large, "--json"]
        out["large.whatif.expandable"] = ["whatif", large, "--set", "expandable_segments:True"]
    return out


def binary() -> str:
    return os.environ.get("MEMSIGHT_BIN", str(ROOT / "build" / "release" / "memsight"))


def run_case(args: list[str]) -> bytes:
    r = subprocess.run([binary(), *args], cwd=ROOT, capture_output=True, timeout=300)
    return (f"$ memsight {' '.join(args)}\n-- exit {r.returncode}\n-- stdout\n".encode()
            + r.stdout + b"\n-- stderr\n" + r.stderr)


def golden_path(name: str) -> pathlib.Path:
    return GOLDEN / f"{name}.txt"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write the golden files anew")
    ap.add_argument("-k", default="", help="only cases whose name holds this")
    opts = ap.parse_args()
    todo = {k: v for k, v in cases().items() if opts.k in k}
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = dict(zip(todo, pool.map(run_case, todo.values())))
    bad = 0
    if opts.update:
        GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, out in got.items():
        path = golden_path(name)
        if opts.update:
            path.write_bytes(out)
        elif not path.exists() or path.read_bytes() != out:
            print(f"differs: {name}")
            bad += 1
    print(f"{len(got)} cases, {bad} differ" + (" (written)" if opts.update else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
