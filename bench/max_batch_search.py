"""How many estimates max_batch's search takes, and whether it finds the
edge, over synthetic memory curves (no torch, no GPU: each estimate is a
line of the curve).

    python3 bench/max_batch_search.py

Curves: linear, bending up (a step needing more memory a sample the larger
the batch, as ViT-B/16 on the H200), bending down, reserved memory in
steps of 20 MiB, flat at small batches; three limits, three upper bounds
of the search, and three amounts by which a step may fit past the line
(under a cap the allocator frees its cache). Prints the mean number of
estimates, the largest, and the cases where the answer is not the edge."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from memsight.torch.fit import api  # noqa: E402


class _Need:
    def __init__(self, alloc: float, reserved: float) -> None:
        self.v = (alloc, reserved)

    def _need(self) -> tuple[float, float]:
        return self.v


CURVES = {
    "linear": lambda n: (500 + 30 * n, 520 + 31 * n),
    "bends up": lambda n: (1200 + 40 * n + 1.5 * n * n, 1270 + 45 * n + 1.6 * n * n),
    "bends down": lambda n: (500 + 400 * math.sqrt(n), 520 + 420 * math.sqrt(n)),
    "in steps": lambda n: (500 + 13 * n, 512 + 20 * math.ceil(13 * n / 20)),
    "flat, then linear": lambda n: (1270 + max(0, 136 * (n - 8)), 1300 + max(0, 140 * (n - 8))),
}


def run(curve, target: float, high: int, past: float) -> tuple[int, int, int]:
    """(the answer, the edge, the estimates)."""
    tried: list = []

    def fits(n: int) -> bool:
        a, r = curve(n)
        tried.append((n, _Need(a, r)))
        return a <= target and r <= target * (1 + past)

    edge = max([n for n in range(1, min(high, 5000) + 1) if fits(n)] or [0])
    tried.clear()
    best = api._search(fits, tried, 1, high, target, lambda: len(tried) < 10) if fits(1) else 0
    return best, edge, len(tried)


def main() -> None:
    counts, misses = [], []
    for name, curve in CURVES.items():
        for target in (2000, 3000, 4500, 6000, 9000, 15000):
            for high in (64, 128, 1 << 16):
                for past in (0.0, 0.01, 0.02):
                    best, edge, n = run(curve, target, high, past)
                    counts.append(n)
                    if best != edge:
                        misses.append(f"  {name}, limit {target}, high {high}, fits {past:.0%} past the line: "
                                      f"{best} for {edge} in {n} estimates")
    print(f"{len(counts)} searches: {sum(counts) / len(counts):.2f} estimates on average, at most {max(counts)}; "
          f"{len(misses)} miss the edge")
    print("\n".join(misses))


if __name__ == "__main__":
    main()
