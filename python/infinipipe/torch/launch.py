"""Which launcher started this process and where it stands in the job, from the environment
alone (no PyTorch import: the trainer names the rank in its first error before PyTorch loads)."""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Launch:
    rank: int
    world_size: int
    local_rank: int
    launcher: str  # "torchrun", "mpirun" or "none"


def launch_env() -> Launch:
    e = os.environ
    if "OMPI_COMM_WORLD_RANK" in e and "RANK" not in e:
        return Launch(int(e["OMPI_COMM_WORLD_RANK"]), int(e["OMPI_COMM_WORLD_SIZE"]),
                      int(e.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")), "mpirun")
    if "RANK" in e and "WORLD_SIZE" in e:
        return Launch(int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", "0")),
                      "torchrun")
    return Launch(0, 1, 0, "none")
