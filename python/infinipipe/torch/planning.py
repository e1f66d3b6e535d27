"""A replica's batches and their plans, as the C++ trainer makes them (docs/architecture.md, "The
life of one iteration", steps 1 to 5): the next global batch of the data order, its split over
the replicas, the replica's plan made on the pipeline's first rank and sent to the others as plan
JSON, so every rank of a pipeline runs the very same plan. While a batch trains, the first rank
plans the next one on a background thread (the planner releases the GIL); that plan is taken
when the next batch's lengths are the ones it planned."""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch.distributed as dist

import infinipipe as ip
from infinipipe.torch.distributed import RankGroups


@dataclass
class Batch:
    sequences: List[List[int]]  # the global batch
    share: List[List[int]]  # this replica's
    consumed_samples: int  # the data position after it (what a checkpoint saves)
    delay_state: str
    plan: Optional[ip.Plan] = None
    setting: str = ""
    plan_seconds: float = 0.0  # the planner's time for it
    plan_wait_seconds: float = 0.0  # what the iteration waited for it
    # On the planning rank: the planner's result and the cost model it planned with (what
    # PlanResult.explain needs); None on the others.
    result: Optional[ip.PlanResult] = None
    planned_with: Optional[ip.CostModel] = None

    @property
    def lengths(self) -> List[int]:
        return [len(s) for s in self.sequences]


@dataclass
class _Planned:
    text: str  # the plan's JSON, as the other ranks receive it
    result: ip.PlanResult
    cost: ip.CostModel
    seconds: float


def _plan(lengths, cfg, cost, forward_only) -> _Planned:
    t = time.monotonic()
    r = ip.plan(lengths, cfg, cost)
    p = ip.plan_forward_only(r.plan, cost, cfg) if forward_only else r.plan
    return _Planned(p.to_json(), r, cost, time.monotonic() - t)


class BatchPlanner:
    def __init__(self, cfg: ip.Config, prior: ip.CostModel, batches: ip.TrainingBatches,
                 g: RankGroups):
        self.cfg, self.prior, self.batches, self.g = cfg, prior, batches, g
        self._ahead: Optional[Batch] = None
        self._future = None
        planner = g.stage == 0 and g.sp_rank == 0  # one rank per replica plans
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1) if planner else None

    def share_of(self, sequences) -> List[List[int]]:
        """This replica's sequences of a global batch (the split by the prior cost model, the
        same on every rank)."""
        if self.g.dp == 1:
            return sequences
        split = ip.replica_split([len(s) for s in sequences], self.g.dp, self.prior, self.cfg)
        return [sequences[i] for i in split[self.g.replica]]

    def _draw(self) -> Batch:
        seqs = self.batches.next()
        return Batch(seqs, self.share_of(seqs), self.batches.consumed_samples,
                     self.batches.delay_state)

    def next(self, plan_cost: ip.CostModel, more: bool) -> Batch:
        """The next batch with its plan; with `more` (a batch follows), the one after it is drawn
        and, on the first rank, planned with `plan_cost` while this one trains."""
        b = self._ahead or self._draw()
        self._ahead = None
        wait = time.monotonic()
        lengths = [len(s) for s in b.share]
        made: Optional[_Planned] = None
        if self._pool is not None:
            if self._future is not None and self._future[0] == lengths:
                made = self._future[1].result()
            else:
                made = _plan(lengths, self.cfg, plan_cost, False)
            self._future = None
            b.result, b.planned_with, b.plan_seconds = made.result, made.cost, made.seconds
        b.plan, b.setting = self.share_plan(made and made.text, made and made.result.setting)
        b.plan_wait_seconds = time.monotonic() - wait
        if more:
            self._ahead = self._draw()
            if self._pool is not None:
                ahead = [len(s) for s in self._ahead.share]
                self._future = (ahead, self._pool.submit(_plan, ahead, self.cfg, plan_cost, False))
        return b

    def evaluation_plan(self, share, plan_cost: ip.CostModel) -> ip.Plan:
        """The forward-only plan of an evaluation batch's share (the background planner, if
        busy, finishes first: one planner at a time)."""
        text = None
        if self._pool is not None:
            if self._future is not None:
                self._future[1].result()
            text = _plan([len(s) for s in share], self.cfg, plan_cost, True).text
        return self.share_plan(text, "")[0]

    def share_plan(self, text: Optional[str], setting: Optional[str]) -> Tuple[ip.Plan, str]:
        """The planning rank's plan (JSON) and setting, on every rank of the replica."""
        if self.g.pp * self.g.sp > 1:
            box = [(text, setting)]
            src = self.g.rank_of(0, self.g.replica, 0)
            dist.broadcast_object_list(box, src=src, group=self.g.replica_group)
            text, setting = box[0]
        return ip.Plan.from_json(text), setting

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
