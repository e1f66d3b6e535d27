"""This rank's PyTorch runtime as a backend of the run driver (``ip.run_train``, the C++
``runtime/run_driver.h``): the driver runs the training loop and its bookkeeping (batches,
plans, the online cost fit, evaluations, metrics, timings, trace and TensorBoard files,
checkpoints, stops) exactly as ``infinipipe train`` does; this object executes each plan on the
rank's stages, steps the optimizer, fills and loads the rank's checkpoint shard, and runs the
driver's collectives over torch.distributed."""

from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
import torch.distributed as dist

import infinipipe as ip
from infinipipe.torch import checkpoint
from infinipipe.torch.distributed import RankGroups
from infinipipe.torch.trainer import RankModel, TrainStep


class TorchBackend:
    """`prior`: the run's cost model before any measurement; `layout`: the stages `model` was
    built from; `weights_from`: a folder whose weights `model` already holds (--hf-model), which
    the driver's weights_load then leaves as it is."""

    def __init__(self, cfg: ip.Config, prior: ip.CostModel, layout: Sequence[ip.Stage],
                 model: RankModel, optimizer: torch.optim.Optimizer, step: TrainStep,
                 weights_from: str = ""):
        self.cfg, self.prior, self.layout = cfg, prior, list(layout)
        self.model, self.optimizer, self.step = model, optimizer, step
        self.g: RankGroups = model.groups
        self.weights_from = weights_from

    def rank(self) -> dict:
        g = self.g
        return {"distributed": g.distributed, "world_rank": g.rank, "world_size": g.world_size,
                "stage": g.stage, "replica": g.replica, "pp": g.pp, "dp": g.dp,
                "plans": g.stage == 0 and g.sp_rank == 0}

    # The collectives (called only when distributed).
    def pipeline_share(self, text: bytes, what: str) -> bytes:
        """The planning rank's plan on every rank of its replica (its stages and their Ulysses
        groups)."""
        g = self.g
        if g.pp * g.sp == 1:
            return text
        box = [text]
        dist.broadcast_object_list(box, src=g.rank_of(0, g.replica, 0), group=g.replica_group)
        return box[0]

    def _sum(self, values: List[float], group) -> List[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.g.device)
        dist.all_reduce(t, group=group)
        return t.cpu().tolist()

    def pipeline_sum(self, values: List[float], what: str) -> List[float]:
        return self._sum(values, self.g.pipeline)

    def world_sum(self, values: List[float], what: str) -> List[float]:
        """Over every pipeline, each counted once (a Ulysses group's ranks hold one fit)."""
        if self.g.sp_rank != 0:
            values = [0.0] * len(values)
        return self._sum(values, None)

    def replicas_gather(self, mine: bytes, what: str) -> List[bytes]:
        """Every replica's `mine` on replica 0 of this stage, in replica order."""
        g = self.g
        everyone = [None] * g.world_size
        dist.all_gather_object(everyone, (g.stage, g.replica, g.sp_rank, mine))
        if g.replica != 0:
            return []
        ours = sorted((r, m) for s, r, k, m in everyone if s == g.stage and k == 0)
        return [m for _, m in ours]

    def stop_agree(self, values: List[int], iteration: int) -> List[int]:
        t = torch.tensor(values, dtype=torch.int64, device=self.g.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [int(v) for v in t.cpu().tolist()]

    def barrier(self, what: str) -> None:
        dist.barrier()

    # One iteration.
    def train(self, plan: ip.Plan, share: List[List[int]], loss_scale: float,
              iteration: int) -> Tuple:
        r = self.step.gradient_sums(plan, share, loss_scale)
        times = [(t.index, t.start, t.end) for t in r.stats.times]
        return (times, r.stats.t0, r.stats.loss_sum, r.stats.predicted_tokens, r.loss_sum,
                r.tokens, r.reduce_seconds, r.seconds)

    def evaluate(self, plan: ip.Plan, share: List[List[int]], what: str) -> Tuple[float, int]:
        return self.step.evaluate(plan, share)

    def optimizer_step(self, completed: int) -> Tuple[float, float]:
        lr = self.cfg.lr_at(completed * self.cfg.global_batch_size)
        return self.step.update(lr), lr

    def memory_measured(self) -> Tuple[int, int]:
        """The device's peak since the last call (CUDA); unknown (0) on CPUs."""
        if self.g.device.type != "cuda":
            return 0, 0
        peak = torch.cuda.max_memory_allocated(self.g.device)
        torch.cuda.reset_peak_memory_stats(self.g.device)
        return peak, 0

    # Checkpoints.
    def shard(self, iteration: int) -> dict:
        return checkpoint.shard(iteration, self.cfg, self.model, self.optimizer)

    def load(self, directory: str, iteration: int) -> None:
        """The checkpoint of `iteration` under `directory` the driver resumes from."""
        reader = ip.CheckpointReader(directory, iteration)
        checkpoint.load_state(reader, self.cfg, self.model, self.optimizer)

    def weights_load(self, directory: str) -> None:
        if self.weights_from and directory == self.weights_from:
            return  # from_pretrained loaded them
        checkpoint.load_weights(directory, self.cfg, self.model)

