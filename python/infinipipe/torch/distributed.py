"""The ranks of a run and their process groups, on torch.distributed: gloo on CPUs, NCCL on GPUs.

Launched by ``torchrun --nproc_per_node N`` (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) or by ``mpirun -np N`` (OpenMPI's OMPI_COMM_WORLD_* variables; the ranks of one
job meet through a file in the job's session folder, so one host needs nothing else, and
MASTER_ADDR / MASTER_PORT work across hosts as with torchrun). Without either, one process.

Rank = stage x dp + replica by default (Megatron-LM's order and the C++ runtime's): the
pipeline of replica r is ranks r, dp + r, 2 dp + r, ... With `--rank-placement pipelines` (or
auto choosing it, infinipipe.rank_order) a pipeline's stages are adjacent ranks instead: rank =
replica x pp + stage, as the C++ runtime's RankLayout (comm/mpi_groups.h). With Ulysses sequence
parallelism of degree u inside a stage, each of those is u consecutive ranks (a node's GPUs):
rank = (stage x dp + replica) x u + position in the Ulysses group (replica x pp + stage in the
pipelines order). Checkpoints and plans do not depend on the order.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from infinipipe.torch.launch import Launch, launch_env


def _store_file(launch: Launch) -> Optional[str]:
    """The file the ranks of an mpirun job on one host meet through; None where they meet at
    MASTER_ADDR (torchrun, or mpirun across hosts)."""
    e = os.environ
    if launch.launcher == "torchrun" or "MASTER_ADDR" in e:
        return None
    # In the job's session folder, which mpirun removes when the job ends, failed or not: a
    # file a failed job left in TMPDIR would hold that job's addresses for the next job given
    # the same id (ids repeat when mpirun's pid does), whose ranks would then dial them.
    session = e.get("OMPI_FILE_LOCATION")
    if session and os.path.isdir(os.path.dirname(session)):
        return os.path.join(os.path.dirname(session), "infinipipe-torch-store")
    # Elsewhere the job's id, with the random key mpirun draws for each job where it has one.
    job = e.get("PMIX_NAMESPACE") or e.get("OMPI_MCA_ess_base_jobid") or e.get("OMPI_COMM_WORLD_SIZE")
    key = e.get("OMPI_MCA_orte_precondition_transports", "")
    job = "".join(c if c.isalnum() else "_" for c in job + key)
    return os.path.join(tempfile.gettempdir(), f"infinipipe-torch-{job}")


def _init_method(launch: Launch) -> str:
    path = _store_file(launch)
    return "env://" if path is None else "file://" + path


ORDERS = ("megatron", "pipelines")


def _check_order(order: str, pp: int) -> None:
    if order not in ORDERS:
        raise ValueError(f"rank order {order!r}: one of {', '.join(ORDERS)}")
    if order == "pipelines" and pp < 1:
        raise ValueError("the pipelines rank order needs the pipeline size pp")


def rank_of(stage: int, replica: int, sp_rank: int, dp: int, sp: int, pp: int = 0,
            order: str = "megatron") -> int:
    """World rank: in Megatron's order stage-major, then replica (stage x dp + replica); in the
    pipelines order replica-major (replica x pp + stage); then the Ulysses group, consecutive
    (as a node's GPUs) in either."""
    _check_order(order, pp)
    unit = replica * pp + stage if order == "pipelines" else stage * dp + replica
    return unit * sp + sp_rank


def place_of(rank: int, dp: int, sp: int, pp: int = 0,
             order: str = "megatron") -> Tuple[int, int, int]:
    """(stage, replica, sp_rank) of a world rank: rank_of's inverse."""
    _check_order(order, pp)
    unit = rank // sp
    if order == "pipelines":
        return unit % pp, unit // pp, rank % sp
    return unit // dp, unit % dp, rank % sp


@dataclass(frozen=True)
class GroupSpec:
    """One process group of a layout. `role` is the RankGroups field its members keep it in;
    `key` says which one of its role it is (for a link group: (kind, boundary), as
    RankGroups.link_groups is keyed)."""

    role: str
    key: Tuple[int, ...]
    ranks: Tuple[int, ...]


def group_specs(pp: int, dp: int, sp: int, num_stages: int, tied: bool,
                links: bool, order: str = "megatron") -> List[GroupSpec]:
    """Every process group of a pp x dp x Ulysses layout, in the order every rank must create
    them (torch.distributed's rule), in rank order `order`. `links`: one group per (kind, stage
    boundary) of each pipeline, for NCCL, whose point-to-point messages ignore tags; a boundary
    between two stages of one rank (pp 1 with virtual stages) needs none."""
    def r(s, rep, k):
        return rank_of(s, rep, k, dp, sp, pp, order)

    def spec(role, key, ranks):
        return GroupSpec(role, tuple(key), tuple(sorted(set(ranks))))

    out = []
    for rep in range(dp):
        for k in range(sp):
            out.append(spec("pipeline", (rep, k), [r(s, rep, k) for s in range(pp)]))
    for s in range(pp):
        out.append(spec("data_parallel", (s,),
                        [r(s, rep, k) for rep in range(dp) for k in range(sp)]))
    for s in range(pp):
        for rep in range(dp):
            out.append(spec("sequence", (s, rep), [r(s, rep, k) for k in range(sp)]))
    for rep in range(dp):
        out.append(spec("replica_group", (rep,),
                        [r(s, rep, k) for s in range(pp) for k in range(sp)]))
    if tied and pp > 1:
        for rep in range(dp):
            for k in range(sp):
                out.append(spec("embedding", (rep, k), [r(0, rep, k), r(pp - 1, rep, k)]))
    if links:
        for rep in range(dp):
            for k in range(sp):
                for b in range(num_stages - 1):
                    lo, hi = r(b % pp, rep, k), r((b + 1) % pp, rep, k)
                    if lo == hi:
                        continue
                    for kind in (0, 1):
                        out.append(spec("link_groups", (kind, b), [lo, hi]))
    return out


@dataclass
class RankGroups:
    """This rank's place in the pp x dp x Ulysses layout and the groups it talks over (None
    where it is no member: the embedding group on a middle stage)."""

    rank: int
    world_size: int
    pp: int
    dp: int
    stage: int  # pipeline rank
    replica: int
    device: torch.device
    backend: str
    sp: int = 1  # Ulysses sequence-parallel degree inside a stage
    sp_rank: int = 0
    order: str = "megatron"  # the rank order: "megatron" or "pipelines"
    pipeline: Optional[object] = None  # this (replica, sp_rank)'s stages: the gradient norm
    data_parallel: Optional[object] = None  # the dp x sp ranks of this stage: gradient sums
    sequence: Optional[object] = None  # this stage's and replica's Ulysses group
    replica_group: Optional[object] = None  # every rank of this replica: its plans
    embedding: Optional[object] = None  # first and last stage (tied embeddings)
    link_groups: Dict[Tuple[int, int], object] = field(default_factory=dict)  # NCCL: per
    # (kind, stage boundary) of this rank's pipeline

    @classmethod
    def at(cls, rank: int, world_size: int, pp: int, dp: int, sp: int, device: torch.device,
           backend: str, order: str = "megatron") -> "RankGroups":
        """The place of `rank` in rank order `order`, without groups (build_groups makes them)."""
        stage, replica, sp_rank = place_of(rank, dp, sp, pp, order)
        return cls(rank, world_size, pp, dp, stage, replica, device, backend, sp, sp_rank, order)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def stage_copies(self) -> int:
        """Ranks holding this stage's parameters: dp replicas x the Ulysses group."""
        return self.dp * self.sp

    @property
    def copy_index(self) -> int:
        """This rank among them (0 .. stage_copies - 1)."""
        return self.replica * self.sp + self.sp_rank

    def rank_of(self, stage: int, replica: int, sp_rank: int) -> int:
        return rank_of(stage, replica, sp_rank, self.dp, self.sp, self.pp, self.order)


def build_groups(g: RankGroups, num_stages: int, tied: bool,
                 links: Optional[bool] = None) -> None:
    """Creates every group of g's layout (on every rank, in one order) and keeps g's own.
    `links` defaults to NCCL's need of them."""
    links = g.backend == "nccl" if links is None else links
    for spec in group_specs(g.pp, g.dp, g.sp, num_stages, tied, links, g.order):
        grp = dist.new_group(list(spec.ranks))
        if g.rank not in spec.ranks:
            continue
        if spec.role == "link_groups":
            g.link_groups[spec.key] = grp
        else:
            setattr(g, spec.role, grp)


def _device_backend(device: str, launch: Launch) -> Tuple[torch.device, str]:
    if device == "cuda":
        if not torch.cuda.is_available():
            from infinipipe import ConfigError
            raise ConfigError("--device cuda needs a CUDA GPU, and PyTorch sees none: use "
                              "--device cpu")
        torch.cuda.set_device(launch.local_rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device()), "nccl"
    return torch.device("cpu"), "gloo"


def join(device: str, timeout_s: float = 600.0) -> Launch:
    """Joins the job (when launched and not joined yet), before its layout is known: the ranks
    can then agree on it (the trainer's auto layout and rank order) before setup makes the
    groups. `device` is "cpu" or "cuda"."""
    launch = launch_env()
    if launch.world_size > 1 and not dist.is_initialized():
        _, backend = _device_backend(device, launch)
        dist.init_process_group(backend, init_method=_init_method(launch), rank=launch.rank,
                                world_size=launch.world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
    return launch


def setup(pp: int, dp: int, device: str, num_stages: int, tied: bool,
          timeout_s: float = 600.0, sp: int = 1, order: str = "megatron") -> RankGroups:
    """Joins the job (when launched and not joined yet) and builds every group in rank order
    `order` ("megatron" or "pipelines"); `device` is "cpu" or "cuda"."""
    launch = launch_env()
    n = pp * dp * sp
    if launch.world_size != n:
        from infinipipe import ConfigError
        raise ConfigError(
            f"pipeline-model-parallel-size {pp} x data-parallel-size {dp} x ulysses-degree {sp} "
            f"= {n} ranks, but {launch.world_size} process(es) run: launch {n} (mpirun -np {n} "
            f"or torchrun --nproc_per_node {n}) or change --pp / --dp / --ulysses-degree")
    dev, backend = _device_backend(device, launch)
    g = RankGroups.at(launch.rank, launch.world_size, pp, dp, sp, dev, backend, order)
    if launch.world_size == 1:
        return g
    join(device, timeout_s)
    build_groups(g, num_stages, tied)
    return g


def shutdown() -> None:
    """Leaves the job at the end of a run every rank reaches: once all are past their last
    collective, the groups go and rank 0 removes the job's meeting file (torch leaves it)."""
    if not dist.is_initialized():
        return
    launch = launch_env()
    dist.barrier()
    dist.destroy_process_group()
    path = _store_file(launch)
    if path is not None and launch.rank == 0:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
