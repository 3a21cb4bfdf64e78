"""Synthetic training runs for the classifier of memory kinds: a simulated
caching allocator writes a torch-shaped snapshot while a scripted training
loop (a numbered stack of layers, AdamW-like state, activation
checkpointing, an OOM) allocates and frees; every block carries the kind it
really is, so a test can compare memsight's answer with the truth at any
moment.

How the phases are recorded is a choice of the run, as in real snapshots:
  "marks"        memsight's marks in user_metadata (torch >= 2.10)
  "annotations"  memsight's marks as external annotations (older torch)
  "stacks"       only the stacks torch records (stacks="python"), and
                 torch's own Optimizer.step annotations
and tags (the top-level "memsight_tags" of memsight.torch) may be written
or not.

    python3 tests/data/make_categories.py      # writes synthetic_categories.pickle.gz
"""

from __future__ import annotations

import gzip
import pathlib
import pickle
from dataclasses import dataclass, field

MiB = 1 << 20
BASE = 0x7F0000000000
SEGMENT = 1 << 30
TRAIN = {"name": "train_step", "filename": "/work/project/train.py", "line": 40}
CALL = {"name": "_call_impl", "filename": "/usr/lib/python3/dist-packages/torch/nn/modules/module.py",
        "line": 1750}
ADAMW = {"name": "_multi_tensor_adamw", "filename": "/usr/lib/python3/dist-packages/torch/optim/adamw.py",
         "line": 500}
RECOMPUTE = {"name": "recompute_fn", "filename": "/usr/lib/python3/dist-packages/torch/utils/checkpoint.py",
             "line": 1000}


def round_size(requested: int) -> int:
    return max(512, (requested + 511) // 512 * 512)


@dataclass
class Truth:
    addr: int
    size: int  # block size
    requested: int
    kind: str  # the category key memsight's JSON uses
    module: str | None  # None: no module
    tagged: bool = False
    alloc: int = -1  # trace entry index (-1: before recording)
    free: int | None = None  # trace entry of its free_requested


@dataclass
class Sim:
    mode: str = "marks"  # "marks", "annotations" or "stacks"
    tags: bool = True
    trace: list = field(default_factory=list)
    truth: list = field(default_factory=list)
    annotations: list = field(default_factory=list)
    storages: list = field(default_factory=list)
    free_blocks: list = field(default_factory=lambda: [(BASE, SEGMENT)])  # (addr, size), by address
    time: int = 1_795_000_000_000_000
    phase: str = ""  # memsight's current mark ("memsight:fwd:layers.0", ...)
    frames: list = field(default_factory=lambda: [TRAIN])

    # -- the allocator ----------------------------------------------------------
    # torch's caching allocator in one large-pool segment: the smallest free
    # block that fits, from its start, split when more than 1 MiB would be
    # left (the large pool's rule, whatever the request: a block's pool is
    # its segment's); freed blocks merge.
    def _carve(self, requested: int) -> tuple[int, int]:
        size = round_size(requested)
        i = min((i for i, (_, n) in enumerate(self.free_blocks) if n >= size),
                key=lambda i: (self.free_blocks[i][1], self.free_blocks[i][0]))
        addr, n = self.free_blocks[i]
        rest = n - size
        if rest > MiB:
            self.free_blocks[i] = (addr + size, rest)
        else:
            del self.free_blocks[i]
            size = n
        return addr, size

    def _release(self, addr: int, size: int) -> None:
        blocks = sorted(self.free_blocks + [(addr, size)])
        merged = [blocks[0]]
        for a, n in blocks[1:]:
            pa, pn = merged[-1]
            merged[-1:] = [(pa, pn + n)] if pa + pn == a else [(pa, pn), (a, n)]
        self.free_blocks = merged

    def _entry(self, action, addr, size, frames=None):
        self.time += 3
        meta = self.phase if self.mode == "marks" else ""
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.time,
             "compile_context": "N/A", "user_metadata": meta,
             "frames": list(self.frames if frames is None else frames)}
        self.trace.append(e)
        return len(self.trace) - 1

    def before(self, requested, kind, module, name):
        """A block that existed before recording began: without tags, all
        that is known of it."""
        addr, size = self._carve(requested)
        t = Truth(addr, size, requested, "before_recording", None)
        self.truth.append(t)
        self.tag(t, kind, name, module)
        return t

    def alloc(self, requested, kind, module=None):
        # Modules come from memsight's marks; stacks alone do not name them.
        addr, size = self._carve(requested)
        t = Truth(addr, size, requested, kind, module if self.mode != "stacks" else None)
        t.alloc = self._entry("alloc", t.addr, requested)
        self.truth.append(t)
        return t

    def free(self, t):
        t.free = self._entry("free_requested", t.addr, t.requested)
        self._entry("free_completed", t.addr, t.requested)
        self._release(t.addr, t.size)

    def tag(self, t, kind, name, module):
        """memsight.torch's tag of the storage in block t, at the snapshot."""
        self.storages.append({"device": 0, "addr": t.addr, "size": t.requested, "category": kind,
                              "name": name, "module": module})
        if self.tags:
            t.tagged, t.kind, t.module = True, kind, module

    # -- phases, as each recording mode shows them -------------------------------
    def mark(self, phase, frames):
        """Enters a phase: memsight's mark, and the stack torch would record."""
        self.phase = phase
        self.frames = frames
        if self.mode == "annotations":
            self.time += 1
            for stage in ("START", "END"):
                self.annotations.append({"stage": stage, "name": phase or "memsight:none",
                                         "device": 0, "time_us": self.time})

    def forward(self, module):
        self.mark(f"memsight:fwd:{module}", [CALL, TRAIN])

    def backward(self, module):
        # the autograd engine's thread: no Python frames
        self.mark(f"memsight:bwd:{module}" if module is not None else "memsight:bwd", [])

    def recompute(self, module):
        self.mark(f"memsight:rec:{module}", [CALL, RECOMPUTE])

    def outside(self):
        self.mark("", [TRAIN])

    def optimizer(self, start):
        name = "Optimizer.step#AdamW.step"
        self.time += 1
        self.annotations.append({"stage": "START" if start else "END", "name": name, "device": 0,
                                 "time_us": self.time})
        if start:
            self.mark("memsight:opt", [ADAMW, TRAIN])
        else:
            self.outside()

    # -- the snapshot ------------------------------------------------------------
    def snapshot(self, oom=None):
        if oom:
            self.time += 3
            self.trace.append({"action": "oom", "device_free": 64 * MiB, "size": oom, "stream": 0,
                               "time_us": self.time, "compile_context": "N/A",
                               "user_metadata": "", "frames": [TRAIN]})
        live = sorted((t for t in self.truth if t.free is None), key=lambda t: t.addr)
        blocks, pos = [], BASE
        for t in live:
            if t.addr > pos:
                blocks.append({"address": pos, "size": t.addr - pos, "requested_size": 0,
                               "state": "inactive", "frames": []})
            blocks.append({"address": t.addr, "size": t.size, "requested_size": t.requested,
                           "state": "active_allocated", "frames": []})
            pos = t.addr + t.size
        blocks.append({"address": pos, "size": BASE + SEGMENT - pos, "requested_size": 0,
                       "state": "inactive", "frames": []})
        allocated = sum(t.size for t in live)
        segment = {"device": 0, "address": BASE, "total_size": SEGMENT, "allocated_size": allocated,
                   "active_size": allocated, "requested_size": sum(t.requested for t in live),
                   "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                   "is_expandable": False, "frames": [], "blocks": blocks}
        snap = {"segments": [segment], "device_traces": [self.trace],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
                "external_annotations": self.annotations}
        if self.tags:
            snap["memsight_tags"] = {"version": 1, "storages": self.storages}
        return snap

    # -- what a test compares with ------------------------------------------------
    def live_at(self, event):
        return [t for t in self.truth
                if t.alloc <= event and (t.free is None or event < t.free)]

    def expected(self, event):
        """{kind: [bytes, tagged bytes]} of the blocks live after trace entry `event`."""
        out: dict[str, list[int]] = {}
        for t in self.live_at(event):
            k = out.setdefault(t.kind, [0, 0])
            k[0] += t.size
            k[1] += t.size if t.tagged else 0
        return out


def train(sim: Sim, steps: int = 2, layers: int = 2, checkpoint: bool = False, oom_at_step=None,
          act: int = 2 * MiB):
    """A training loop over `layers` numbered layers (`layers.0`, ...): each
    step makes its input, runs forward (an activation of `act` bytes and a temporary per
    layer; with `checkpoint`, only each layer's input is kept and the
    backward re-runs the forward), the loss, backward (a gradient flowing
    between layers, a gradient per weight) and an AdamW step (two states per
    weight, made at the first step; a temporary), then zero_grad frees the
    gradients. The weights existed before recording. Returns the sim."""
    w = [sim.before(4 * MiB, "parameter", f"layers.{i}", f"layers.{i}.weight") for i in range(layers)]
    sim.before(64 * 1024, "buffer", f"layers.{layers - 1}", f"layers.{layers - 1}.running_mean")
    state = []
    old = []  # what the previous step's Python references hold until rebound
    for step in range(steps):
        sim.outside()
        x = sim.alloc(1 * MiB, "activation", None)
        for t in old:
            sim.free(t)
        acts = []
        for i in range(layers):
            sim.forward(f"layers.{i}")
            tmp = sim.alloc(3 * MiB, "temporary", f"layers.{i}")
            sim.free(tmp)
            if oom_at_step == step and i == layers - 1:
                # activations of every layer live: the request fails
                sim.outside()
                return sim.snapshot(oom=2 << 30)  # more than the cache and the device hold
            kind = "temporary" if checkpoint else "activation"
            a = sim.alloc(act, kind, f"layers.{i}")
            if checkpoint:
                sim.free(a)
            acts.append(a)
        sim.outside()
        loss = sim.alloc(512, "activation", None)
        grads = []
        for i in reversed(range(layers)):
            if checkpoint:
                sim.recompute(f"layers.{i}")
                rt = sim.alloc(3 * MiB, "temporary", f"layers.{i}")
                sim.free(rt)
                ra = sim.alloc(act, "activation", f"layers.{i}")
            sim.backward(f"layers.{i}")
            flow = sim.alloc(2 * MiB, "autograd_internal", f"layers.{i}")
            g = sim.alloc(4 * MiB, "gradient", f"layers.{i}")
            grads.append(g)
            if checkpoint:
                sim.free(ra)
            else:
                sim.free(acts[i])
            sim.free(flow)
        grads.reverse()
        sim.optimizer(True)
        if not state:
            for i in range(layers):
                for key in ("exp_avg", "exp_avg_sq"):
                    s = sim.alloc(4 * MiB, "optimizer_state", None)
                    state.append((s, i, key))
        tmp = sim.alloc(1 * MiB, "temporary", None)
        sim.free(tmp)
        sim.optimizer(False)
        last = step == steps - 1
        if last:  # the snapshot is taken after the step: gradients still live
            for i, g in enumerate(grads):
                sim.tag(g, "gradient", f"layers.{i}.weight.grad", f"layers.{i}")
        else:
            for g in grads:  # zero_grad(set_to_none=True)
                sim.free(g)
        old = [x, loss]
    for s, i, key in state:
        sim.tag(s, "optimizer_state", f"optimizer.state[layers.{i}.weight].{key}", f"layers.{i}")
    return sim.snapshot()


if __name__ == "__main__":
    snap = train(Sim("marks", tags=True), steps=3, layers=4)
    out = pathlib.Path(__file__).with_name("synthetic_categories.pickle.gz")
    out.write_bytes(gzip.compress(pickle.dumps(snap, protocol=4), mtime=0))
    print(out, out.stat().st_size)
