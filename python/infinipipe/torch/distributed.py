"""The ranks of a run and their process groups, on torch.distributed: gloo on CPUs, NCCL on GPUs.

Launched by ``torchrun --nproc_per_node N`` (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) or by ``mpirun -np N`` (OpenMPI's OMPI_COMM_WORLD_* variables; the ranks of one
job meet through a file named after the job, so one host needs nothing else, and MASTER_ADDR /
MASTER_PORT work across hosts as with torchrun). Without either, one process.

Rank = stage x dp + replica (Megatron-LM's order and the C++ runtime's, so checkpoints and
plans mean the same in both): the pipeline of replica r is ranks r, dp + r, 2 dp + r, ...
"""

from __future__ import annotations

import datetime
import os
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
import torch.distributed as dist


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


def _init_method(launch: Launch) -> str:
    e = os.environ
    if launch.launcher == "torchrun" or "MASTER_ADDR" in e:
        return "env://"
    # mpirun on one host: every rank of the job knows the job's id.
    job = e.get("PMIX_NAMESPACE") or e.get("OMPI_MCA_ess_base_jobid") or e.get("OMPI_COMM_WORLD_SIZE")
    job = "".join(c if c.isalnum() else "_" for c in job)
    return "file://" + os.path.join(tempfile.gettempdir(), f"infinipipe-torch-{job}")


@dataclass
class RankGroups:
    """This rank's place in the pp x dp layout and the groups it reduces over."""

    rank: int
    world_size: int
    pp: int
    dp: int
    stage: int  # pipeline rank
    replica: int
    device: torch.device
    backend: str
    pipeline: Optional[object] = None  # the ranks of this replica's pipeline (norm, loss)
    data_parallel: Optional[object] = None  # the replicas of this stage (gradient sum)
    embedding: Optional[object] = None  # first and last stage of this replica (tied embeddings)
    link_groups: Dict[Tuple[int, int], object] = None  # NCCL: per (kind, stage boundary)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def pipeline_ranks(self, replica: int) -> List[int]:
        return [s * self.dp + replica for s in range(self.pp)]


def setup(pp: int, dp: int, device: str, num_stages: int, tied: bool,
          timeout_s: float = 600.0) -> RankGroups:
    """Joins the job (when launched) and builds every group; `device` is "cpu" or "cuda"."""
    launch = launch_env()
    if launch.world_size != pp * dp:
        from infinipipe import ConfigError
        raise ConfigError(
            f"pipeline-model-parallel-size {pp} x data-parallel-size {dp} = {pp * dp} ranks, but "
            f"{launch.world_size} process(es) run: launch {pp * dp} (mpirun -np {pp * dp} or "
            f"torchrun --nproc_per_node {pp * dp}) or change --pp / --dp")
    if device == "cuda":
        if not torch.cuda.is_available():
            from infinipipe import ConfigError
            raise ConfigError("--device cuda needs a CUDA GPU, and PyTorch sees none: use "
                              "--device cpu")
        torch.cuda.set_device(launch.local_rank % torch.cuda.device_count())
        dev = torch.device("cuda", torch.cuda.current_device())
        backend = "nccl"
    else:
        dev, backend = torch.device("cpu"), "gloo"
    g = RankGroups(launch.rank, launch.world_size, pp, dp, launch.rank // dp, launch.rank % dp,
                   dev, backend)
    if launch.world_size == 1:
        return g
    dist.init_process_group(backend, init_method=_init_method(launch), rank=launch.rank,
                            world_size=launch.world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))
    # Every rank creates every group, in the same order (torch.distributed's rule).
    for r in range(dp):
        grp = dist.new_group(g.pipeline_ranks(r))
        if r == g.replica:
            g.pipeline = grp
    for s in range(pp):
        grp = dist.new_group([s * dp + r for r in range(dp)])
        if s == g.stage:
            g.data_parallel = grp
    if tied and pp > 1:
        for r in range(dp):
            grp = dist.new_group([r, (pp - 1) * dp + r])
            if r == g.replica:
                g.embedding = grp
    g.link_groups = {}
    if backend == "nccl":
        # Tags do not order NCCL's point-to-point messages: one group per kind and boundary.
        for r in range(dp):
            for b in range(num_stages - 1):
                lo, hi = (b % pp) * dp + r, ((b + 1) % pp) * dp + r
                for kind in (0, 1):
                    grp = dist.new_group(sorted({lo, hi})) if lo != hi else None
                    if r == g.replica:
                        g.link_groups[(kind, b)] = grp
    return g


def all_reduce_sum(tensors: List[torch.Tensor], group) -> None:
    """Sums the tensors over `group` in one flat buffer (in place)."""
    if group is None or not tensors:
        return
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    at = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[at:at + n].view_as(t))
        at += n


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
