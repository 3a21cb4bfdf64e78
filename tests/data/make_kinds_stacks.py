"""Runs recorded with torch's stacks alone (stacks="python", context="all",
nothing handed to memsight) for the kinds that only the stacks and
lifetimes tell apart (docs/summary.md, "What kind of memory"): SGD's later
steps, which allocate nothing, so that zero_grad frees the gradients before
any other phase begins; DDP's reducer buckets; FSDP2's all-gather and
reduce-scatter buffers and its unsharded parameters. Built on the simulated
allocator of make_categories.py; each function returns (snapshot, marks),
marks naming trace entries a test asks about.
"""

from __future__ import annotations

from make_categories import CALL, MiB, TRAIN, Sim

TORCH = "/usr/lib/python3/dist-packages/torch/"
SGD = {"name": "_multi_tensor_sgd", "filename": TORCH + "optim/sgd.py", "line": 400}
ZERO_GRAD = {"name": "zero_grad", "filename": TORCH + "optim/optimizer.py", "line": 990}
MAKE_GRADS = {"name": "backward", "filename": TORCH + "_tensor.py", "line": 640}
DDP_INIT = {"name": "_ddp_init_helper", "filename": TORCH + "nn/parallel/distributed.py", "line": 1200}
AG = {"name": "allocate", "filename": TORCH + "distributed/fsdp/_fully_shard/_fsdp_collectives.py",
      "line": 60}
UNSHARD = {"name": "alloc_storage", "filename": TORCH + "distributed/fsdp/_fully_shard/_fsdp_param.py",
           "line": 880}
REDUCE = {"name": "foreach_reduce", "filename": TORCH + "distributed/fsdp/_fully_shard/_fsdp_collectives.py",
          "line": 400}
POST_BACKWARD = {"name": "backward", "filename": TORCH + "distributed/fsdp/_fully_shard/_fsdp_param_group.py",
                 "line": 700}


def _phase(sim: Sim, frames: list) -> None:
    sim.frames = list(frames)


def sgd(steps: int = 3, layers: int = 3, param: int = 4 * MiB, free_stacks: bool = True):
    """Parameters made by .cuda(), then SGD with momentum: only the first
    step allocates (its momentum buffers). Returns the snapshot and the
    trace entry ending each step's backward."""
    sim = Sim(mode="stacks", tags=False)
    apply = {"name": "_apply", "filename": TORCH + "nn/modules/module.py", "line": 930}
    _phase(sim, [apply, TRAIN])
    params = [sim.alloc(param, "parameter") for _ in range(layers)]
    momentum, ends = [], []
    for step in range(steps):
        _phase(sim, [TRAIN])
        x = sim.alloc(1 * MiB, "activation")
        _phase(sim, [CALL, TRAIN])
        acts = [sim.alloc(1 * MiB, "activation") for _ in range(layers)]
        _phase(sim, [MAKE_GRADS, TRAIN])
        seed = sim.alloc(512, "autograd_internal")
        _phase(sim, [])  # the autograd engine's thread
        grads = []
        for a in reversed(acts):
            flow = sim.alloc(1 * MiB, "autograd_internal")
            grads.append(sim.alloc(param, "gradient"))
            sim.free(a)
            sim.free(flow)
        _phase(sim, [MAKE_GRADS, TRAIN])
        sim.free(seed)
        ends.append(len(sim.trace) - 1)
        if step == 0:
            _phase(sim, [SGD, TRAIN])
            momentum = [sim.alloc(param, "optimizer_state") for _ in range(layers)]
        _phase(sim, [ZERO_GRAD, TRAIN] if free_stacks else [])
        for g in grads:
            sim.free(g)
        _phase(sim, [TRAIN])
        sim.free(x)
    snap = sim.snapshot()
    if not free_stacks:  # context="alloc": frees carry no stacks
        for e in snap["device_traces"][0]:
            if e["action"] != "alloc":
                del e["frames"]
    del params, momentum
    return snap, ends


def ddp(steps: int = 2, param: int = 4 * MiB):
    """DDP: the reducer's bucket, made when the model is wrapped and kept."""
    sim = Sim(mode="stacks", tags=False)
    _phase(sim, [DDP_INIT, TRAIN])
    sim.alloc(2 * param, "communication")
    for _ in range(steps):
        _phase(sim, [CALL, TRAIN])
        a = sim.alloc(1 * MiB, "activation")
        _phase(sim, [])
        g = sim.alloc(param, "gradient")
        sim.free(a)
        _phase(sim, [ZERO_GRAD, TRAIN])
        sim.free(g)
    return sim.snapshot(), len(sim.trace) - 1


def fsdp2(param: int = 4 * MiB):
    """FSDP2, one step: the all-gather buffer and the unsharded parameter
    made in the forward's pre-hook, the reduce-scatter input freed in the
    backward and its output kept as the sharded gradient until zero_grad.
    Returns the snapshot and the entry where all of them are live."""
    sim = Sim(mode="stacks", tags=False)
    _phase(sim, [AG, CALL, TRAIN])
    ag = sim.alloc(param, "communication")
    _phase(sim, [UNSHARD, CALL, TRAIN])
    full = sim.alloc(param, "parameter")
    _phase(sim, [CALL, TRAIN])
    act = sim.alloc(1 * MiB, "activation")
    _phase(sim, [AG, POST_BACKWARD])
    rs_in = sim.alloc(param, "communication")
    rs_out = sim.alloc(param // 2, "gradient")
    at = len(sim.trace) - 1
    sim.free(rs_in)
    sim.free(act)
    sim.free(ag)
    sim.free(full)
    _phase(sim, [ZERO_GRAD, TRAIN])
    sim.free(rs_out)
    _phase(sim, [CALL, TRAIN])
    sim.alloc(1 * MiB, "activation")
    return sim.snapshot(), at
