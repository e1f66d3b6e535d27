"""One rank of a PyTorch training run of infinipipe plans: the stages this rank holds, their
optimizer, and one iteration (plan the replica's share, execute the rank's actions, sum
gradients over the replicas and the tied embedding's ends, clip, step).

The maths are the C++ trainer's (docs/architecture.md, invariant 1): the loss is the mean over
every predicted token of the global batch, each replica scales its loss gradient by
1 / (global predicted tokens), so data-parallel gradients are summed, not averaged.
AdamW is torch.optim.AdamW with Megatron-LM's groups (no weight decay on 1-D tensors), the
learning rate Megatron's schedule (the C++ LrSchedule), clipping Megatron's coefficient.

With --use-distributed-optimizer (ZeRO-1) each replica of a stage keeps optimizer state for the
parameters it owns only (whole tensors, balanced by size, the same assignment on every replica),
updates them, and sends the new values to the other replicas. Gradients are still summed whole,
so every parameter gets the update the replicated optimizer gives it. (The C++ runtime splits
the flat range of elements instead; the checkpoint is the same: each state whole, written by one
replica.)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

import infinipipe as ip
from infinipipe.torch.distributed import RankGroups
from infinipipe.torch.executor import RankExecutor, RankStats
from infinipipe.torch.link import DistLink, LocalLink
from infinipipe.torch.model import stage_from_spec
from infinipipe.torch.stages import PipelineStage
from infinipipe.torch.ulysses import UlyssesGroup


@dataclass
class StepResult:
    loss: float  # mean over the global batch's predicted tokens
    predicted_tokens: int
    grad_norm: float  # before clipping
    stats: RankStats
    seconds: float


@dataclass
class Gradients:
    loss_sum: float  # over the world's predicted tokens
    tokens: int  # predicted tokens over the world
    stats: RankStats  # this rank's actions
    seconds: float  # the actions'
    reduce_seconds: float  # the sums after them


BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket


def sum_in_buckets(tensors: List[torch.Tensor], group, bucket_bytes: int = BUCKET_BYTES) -> None:
    """Sums the tensors over `group` in place: one at least a bucket's size by itself, smaller
    ones packed into a flat bucket of up to `bucket_bytes` (never a flat copy of them all)."""
    if group is None:
        return
    bucket: List[torch.Tensor] = []
    size = 0

    def flush():
        nonlocal bucket, size
        if len(bucket) == 1:
            dist.all_reduce(bucket[0], group=group)
        elif bucket:
            flat = torch.cat([t.reshape(-1) for t in bucket])
            dist.all_reduce(flat, group=group)
            at = 0
            for t in bucket:
                t.copy_(flat[at:at + t.numel()].view_as(t))
                at += t.numel()
        bucket, size = [], 0

    for t in tensors:
        n = t.numel() * t.element_size()
        if bucket and (size + n > bucket_bytes or t.dtype != bucket[0].dtype):
            flush()
        bucket.append(t)
        size += n
    flush()


def predicted_tokens(lengths: Sequence[int]) -> int:
    return sum(max(n - 1, 0) for n in lengths)


class RankModel:
    """The stages of one rank (stage s lives on pipeline rank s % pp), built from the run's
    stage layout, and the parameters it trains, counts and saves."""

    def __init__(self, config: ip.Config, layout: Sequence[ip.Stage], groups: RankGroups,
                 dtype: torch.dtype = torch.float32,
                 make_stage: Optional[Callable[[ip.Stage], PipelineStage]] = None):
        """`make_stage`: the model's stage of a layout entry (hf.HfModel.stage); infinipipe's own
        Llama by default."""
        self.config, self.groups = config, groups
        self.layout = list(layout)
        make = make_stage or (lambda spec: stage_from_spec(config.model, spec))
        self.stages: Dict[int, PipelineStage] = {
            s.index: make(s).to(device=groups.device, dtype=dtype)
            for s in self.layout if s.rank == groups.stage}

    def init(self, seed: Optional[int] = None) -> None:
        """The C++ engine's initial values (a function of the seed and each name)."""
        for spec in self.layout:
            if spec.index in self.stages:
                self.stages[spec.index].load(
                    ip.init_params(self.config, seed, spec.first_layer, spec.num_layers,
                                   spec.has_embedding, spec.has_lm_head))

    def load(self, values: dict) -> None:
        for stage in self.stages.values():
            stage.load({n: values[n] for n, _ in stage.named_parameters()})

    def named_parameters(self):
        for stage in self.stages.values():
            yield from stage.named_parameters()

    def unique_parameters(self):
        """Every parameter once: a last stage's copy of the tied embedding, whose first stage is
        on another rank, is left out (that rank counts and saves it)."""
        for stage in self.stages.values():
            copy = stage.tied_weight() if stage.tied_copy else None
            for name, p in stage.named_parameters():
                if p is not copy:
                    yield name, p

    def owners(self) -> Dict[str, int]:
        """The distributed optimizer's owner of each parameter of this rank among the stage's
        copies (groups.copy_index): the largest first, each to the copy with the fewest elements
        so far."""
        load = [0] * self.groups.stage_copies
        out = {}
        params = sorted(self.named_parameters(), key=lambda np_: (-np_[1].numel(), np_[0]))
        for name, p in params:
            r = min(range(self.groups.stage_copies), key=lambda i: (load[i], i))
            out[name] = r
            load[r] += p.numel()
        return out

    def tied_parameter(self) -> Optional[torch.Tensor]:
        """Where pp > 1 ties the embedding: this rank's end of it (first or last stage)."""
        if self.groups.pp == 1:
            return None
        for stage in self.stages.values():
            if stage.tied_weight() is not None:
                return stage.tied_weight()
        return None


def sharded(config: ip.Config, model: RankModel) -> bool:
    """Whether the optimizer state is sharded over the stage's copies (ZeRO-1)."""
    return config.use_distributed_optimizer and model.groups.stage_copies > 1


def make_optimizer(config: ip.Config, model: RankModel) -> torch.optim.Optimizer:
    """AdamW (or SGD) as the C++ optimizer: Megatron leaves 1-D tensors undecayed. Sharded, over
    the parameters this replica owns only."""
    owners = model.owners() if sharded(config, model) else None
    decay, plain = [], []
    for name, p in model.named_parameters():
        if owners is None or owners[name] == model.groups.copy_index:
            (decay if p.dim() >= 2 else plain).append(p)
    if config.optimizer == "sgd":
        return torch.optim.SGD(decay + plain, lr=config.lr)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay},
         {"params": plain, "weight_decay": 0.0}],
        lr=config.lr, betas=config.adam_betas, eps=config.adam_eps)


class TrainStep:
    """One iteration of one rank, given its replica's plan and sequences."""

    def __init__(self, config: ip.Config, model: RankModel, optimizer: torch.optim.Optimizer,
                 bf16: bool = False):
        self.config, self.model, self.optimizer = config, model, optimizer
        self.groups = model.groups
        self.owners = model.owners() if sharded(config, model) else None
        g = self.groups
        self.ulysses = None
        if g.sp > 1:
            self.ulysses = UlyssesGroup([g.rank_of(g.stage, g.replica, k) for k in range(g.sp)],
                                        g.sp_rank, g.sequence)
        # bf16: the executor casts the fp32 parameters once per step into bf16 working copies.
        self.dtype = torch.bfloat16 if bf16 else None

    def _link(self, plan):
        if self.groups.distributed:  # activations in the compute dtype, else the parameters'
            own = next(p for _, p in self.model.named_parameters()).dtype
            return DistLink(plan, self.groups, self.dtype or own)
        return LocalLink()

    def gradient_sums(self, plan, sequences: Sequence[Sequence[int]], loss_scale: float,
                      synchronize: bool = False) -> "Gradients":
        """Executes this rank's actions and reduces: every parameter's gradient of the loss sum
        times `loss_scale` (1 / the global batch's predicted tokens: its mean), summed over the
        replicas and the tied embedding's two ends; the loss sum and predicted tokens over the
        world."""
        g = self.groups
        for _, p in self.model.named_parameters():
            p.grad = None
        t0 = time.monotonic()
        ex = RankExecutor(plan, g.stage, self.model.stages, self._link(plan), sequences,
                          loss_scale, g.device, self.dtype, self.ulysses)
        stats = ex.run(synchronize)
        t_actions = time.monotonic()
        params = [p for _, p in self.model.named_parameters()]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        tied = self.model.tied_parameter()
        if tied is not None:
            sum_in_buckets([tied.grad], g.embedding)
        if g.stage_copies > 1:  # the replicas and the Ulysses group hold the same parameters
            sum_in_buckets([p.grad for p in params], g.data_parallel)
        totals = torch.tensor([stats.loss_sum, float(stats.predicted_tokens)], dtype=torch.float64,
                              device=g.device)
        if g.distributed:
            dist.all_reduce(totals)
        return Gradients(float(totals[0]), int(totals[1]), stats, t_actions - t0,
                         time.monotonic() - t_actions)

    def gradients(self, plan, sequences: Sequence[Sequence[int]], global_predicted: int,
                  synchronize: bool = False):
        """gradient_sums, checked: (the global batch's mean loss, this rank's stats)."""
        r = self.gradient_sums(plan, sequences, 1.0 / global_predicted, synchronize)
        if r.tokens != global_predicted:
            raise RuntimeError(f"the chunks predicted {r.tokens} tokens, the batch has "
                               f"{global_predicted}: a token was lost or repeated")
        return r.loss_sum / global_predicted, r.stats

    def evaluate(self, plan, sequences: Sequence[Sequence[int]]) -> tuple:
        """A forward-only plan of this rank's replica: (loss sum, predicted tokens) of the whole
        global batch, summed over the world."""
        g = self.groups
        ex = RankExecutor(plan, g.stage, self.model.stages, self._link(plan), sequences, 1.0,
                          g.device, self.dtype, self.ulysses)
        stats = ex.run()
        totals = torch.tensor([stats.loss_sum, float(stats.predicted_tokens)], dtype=torch.float64,
                              device=g.device)
        if g.distributed:
            dist.all_reduce(totals)
        return float(totals[0]), int(totals[1])

    def run(self, plan, sequences: Sequence[Sequence[int]], global_predicted: int,
            lr: float, synchronize: bool = False) -> StepResult:
        t0 = time.perf_counter()
        loss, stats = self.gradients(plan, sequences, global_predicted, synchronize)
        norm = self.update(lr)
        return StepResult(loss, global_predicted, norm, stats, time.perf_counter() - t0)

    def update(self, lr: float) -> float:
        """Clips the summed gradients (Megatron's coefficient), steps the optimizer with `lr`
        and keeps every copy of a parameter equal; returns the norm before clipping."""
        norm = self._clip([p for _, p in self.model.named_parameters()])
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        if sharded(self.config, self.model):
            g = self.groups
            for name, p in self.model.named_parameters():  # the owners' new values, everywhere
                owner = self.owners[name]
                src = g.rank_of(g.stage, owner // g.sp, owner % g.sp)
                dist.broadcast(p.data, src=src, group=g.data_parallel)
        tied = self.model.tied_parameter()
        if tied is not None:  # both ends stay bit-identical: the first stage's values win
            src = self.groups.rank_of(0, self.groups.replica, self.groups.sp_rank)
            dist.broadcast(tied.data, src=src, group=self.groups.embedding)
        return norm

    def _clip(self, params: List[torch.Tensor]) -> float:
        """The global gradient norm (a tied copy counted once) and Megatron's clipping."""
        sq = torch.zeros((), dtype=torch.float64, device=self.groups.device)
        for _, p in self.model.unique_parameters():  # no fp64 copy of a gradient
            sq += torch.linalg.vector_norm(p.grad, dtype=torch.float64).square()
        if self.groups.distributed:
            dist.all_reduce(sq, group=self.groups.pipeline)
        norm = math.sqrt(float(sq))
        clip = self.config.clip_grad
        if clip > 0:
            coeff = clip / (norm + 1e-6)
            if coeff < 1.0:
                for p in params:
                    p.grad.mul_(coeff)
        return norm
