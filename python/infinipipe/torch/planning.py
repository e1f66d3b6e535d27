"""A replica's share of a global batch and its plan on every rank of the replica, as the C++
trainer makes them (docs/architecture.md, "The life of one iteration", steps 2 and 4): the
batch split over the replicas by the prior cost model, the plan made on the pipeline's first
rank and sent to its other ranks as plan JSON, so every rank of a pipeline runs the very same
plan. ``infinipipe.torch.wrap`` uses it; the trainer's own runs are the C++ run driver's."""

from __future__ import annotations

from typing import List, Optional, Tuple

import torch.distributed as dist

import infinipipe as ip
from infinipipe.torch.distributed import RankGroups


class BatchPlanner:
    def __init__(self, cfg: ip.Config, prior: ip.CostModel, g: RankGroups):
        self.cfg, self.prior, self.g = cfg, prior, g

    def share_of(self, sequences) -> List[List[int]]:
        """This replica's sequences of a global batch (the split by the prior cost model, the
        same on every rank)."""
        if self.g.dp == 1:
            return sequences
        split = ip.replica_split([len(s) for s in sequences], self.g.dp, self.prior, self.cfg)
        return [sequences[i] for i in split[self.g.replica]]

    def share_plan(self, text: Optional[str], setting: Optional[str]) -> Tuple[ip.Plan, str]:
        """The planning rank's plan (JSON) and setting, on every rank of the replica."""
        if self.g.pp * self.g.sp > 1:
            box = [(text, setting)]
            src = self.g.rank_of(0, self.g.replica, 0)
            dist.broadcast_object_list(box, src=src, group=self.g.replica_group)
            text, setting = box[0]
        return ip.Plan.from_json(text), setting
