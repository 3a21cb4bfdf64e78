"""Where this process sits in a distributed job.

torch.distributed, when it is initialised, gives the global rank and world
size; the per-node numbers come from the variables launchers set (torchrun,
SLURM, Open MPI). torch is never imported here: if the user initialised a
process group, ``torch.distributed`` is already in ``sys.modules``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

# For each variable, the environment names launchers use, first match wins.
_ENV_NAMES: dict[str, tuple[str, ...]] = {
    "rank": ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"),
    "world_size": ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
    "local_rank": ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"),
    "local_world_size": (
        "LOCAL_WORLD_SIZE",
        "SLURM_NTASKS_PER_NODE",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    "node_rank": ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID"),
}

# Values when the job is not distributed at all (a single process).
_SINGLE_PROCESS = {"rank": 0, "world_size": 1, "local_rank": 0, "local_world_size": 1, "node_rank": 0}


def _from_env(name: str, env: Mapping[str, str]) -> int | None:
    for var in _ENV_NAMES[name]:
        value = env.get(var)
        if value is None or value == "":
            continue
        try:
            # SLURM_NTASKS_PER_NODE can read "4(x2)"; the first number is ours.
            return int(value.split("(")[0].split(",")[0])
        except ValueError:
            continue
    return None


def _initialised_process_group() -> Any | None:
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return dist
    except Exception:  # a half-imported or broken torch: treat as not distributed
        return None
    return None


def dist_info(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """rank, world_size, local_rank, local_world_size and node_rank.

    With an initialised process group, rank and world_size come from it and a
    per-node number no launcher variable gives is left out (so a template keeps
    ``{local_rank}`` literally rather than guess). Without one, missing
    variables take single-process values.
    """
    env = os.environ if env is None else env
    info: dict[str, int] = {}
    dist = _initialised_process_group()
    if dist is not None:
        info["rank"] = int(dist.get_rank())
        info["world_size"] = int(dist.get_world_size())
        for name in ("local_rank", "local_world_size", "node_rank"):
            value = _from_env(name, env)
            if value is not None:
                info[name] = value
        if info["world_size"] == 1:
            for name, value in _SINGLE_PROCESS.items():
                info.setdefault(name, value)
        return info
    for name, default in _SINGLE_PROCESS.items():
        value = _from_env(name, env)
        info[name] = default if value is None else value
    return info


def global_rank() -> int:
    return dist_info().get("rank", 0)


def world_size() -> int:
    return dist_info().get("world_size", 1)
