"""A requests-only snapshot, as memsight.torch.estimate writes one: the
allocations and frees of two training steps at fake addresses, no segments
and no segment events, phase marks, tags of the parameters and
memsight_estimate. `memsight estimate` completes it.

    python3 tests/cli/requests_only.py OUT.pickle [--scale N]
"""

from __future__ import annotations

import pathlib
import pickle
import sys

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"

MiB = 1 << 20
FAKE = 0x100000000  # fake addresses: unique, never reused
TRAIN = {"name": "train_step", "filename": "/work/project/train.py", "line": 40}
LINEAR = {"name": "forward", "filename": "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py",
          "line": 125}
ADAMW = {"name": "_multi_tensor_adamw", "filename": "/usr/lib/python3/dist-packages/torch/optim/adamw.py",
         "line": 500}


def rounded(n: int) -> int:
    return max(512, (n + 511) // 512 * 512)


class Requests:
    def __init__(self) -> None:
        self.trace: list[dict] = []
        self.annotations: list[dict] = []
        self.next = FAKE
        self.time = 1_700_000_000_000_000
        self.live: dict[int, int] = {}  # fake address -> size

    def tick(self) -> int:
        self.time += 7
        return self.time

    def alloc(self, size: int, frame: dict) -> int:
        size = rounded(size)
        addr, self.next = self.next, self.next + size + 4096
        self.trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                           "time_us": self.tick(), "frames": [frame, TRAIN], "device_free": 0})
        self.live[addr] = size
        return addr

    def free(self, addr: int) -> None:
        size = self.live.pop(addr)
        for action in ("free_requested", "free_completed"):
            self.trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                               "time_us": self.tick(), "frames": [TRAIN], "device_free": 0})

    def mark(self, stage: str, name: str) -> None:
        self.annotations.append({"stage": stage, "name": name, "device": 0, "time_us": self.tick()})


def build(scale: int = 1) -> dict:
    """Parameters of a few layers (tagged), then two steps: a forward that
    keeps activations of several sizes (small and large pools), a backward
    that frees them and makes gradients, an optimizer step that makes its
    state on the first step."""
    r = Requests()
    widths = [3 * MiB * scale, 700_000 * scale, 12 * MiB * scale, 300_000, 25 * MiB * scale, 9 * MiB * scale]
    params = [r.alloc(w, LINEAR) for w in widths]
    tags = [{"device": 0, "addr": a, "size": r.live[a], "category": "parameter",
             "name": f"layers.{i}.weight", "module": f"layers.{i}"} for i, a in enumerate(params)]
    grads: list[int] = []
    state: list[int] = []
    for _step in range(2):
        r.mark("START", "memsight::forward")
        acts = []
        for i, w in enumerate(widths):
            acts.append(r.alloc(w * 2 + 1000 * i, LINEAR))
            tmp = r.alloc(w // 3 + 512, LINEAR)
            r.free(tmp)
        r.mark("END", "memsight::forward")
        r.mark("START", "memsight::backward")
        for i, a in reversed(list(enumerate(acts))):
            if len(grads) < len(widths):
                grads.append(r.alloc(widths[i], LINEAR))
            r.free(a)
        r.mark("END", "memsight::backward")
        r.mark("START", "memsight::optimizer_step")
        if not state:
            for w in widths:
                state += [r.alloc(w, ADAMW), r.alloc(w, ADAMW)]
        work = r.alloc(sum(widths) // 2, ADAMW)
        r.free(work)
        r.mark("END", "memsight::optimizer_step")
    return {
        "segments": [],
        "device_traces": [r.trace],
        "external_annotations": r.annotations,
        "memsight_tags": {"version": 1, "time_us": r.time, "storages": tags},
        "memsight_estimate": {"version": 1, "produced_by": "tests/cli/requests_only.py",
                              "torch": "2.11.0", "terms": [{"name": "cuBLAS workspace", "bytes": 8 * MiB}],
                              "notes": ["synthetic"]},
    }


def write(path, scale: int = 1) -> dict:
    data = build(scale)
    with open(path, "wb") as f:
        pickle.dump(data, f, protocol=4)
    return data


if __name__ == "__main__":
    write(sys.argv[1], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
