"""How activations (forward) and their gradients (backward) cross stage boundaries: in process
(LocalLink), or between the ranks of a pipeline with torch.distributed point-to-point ops
(DistLink). Shapes come from the plan (a chunk's tokens x hidden), so nothing but the tensor
travels. Sends do not wait; a receive waits for its tensor, which the plans' blocking replay
(the C++ validator) guarantees will come. A sent tensor is held until the first send or receive
after its send completed (in process: until it is received), as the cost model assumes."""

from __future__ import annotations

from typing import Dict, List, Tuple

import torch
import torch.distributed as dist


class StageLink:
    def send_activation(self, from_stage: int, chunk: int, t: torch.Tensor) -> None:
        raise NotImplementedError

    def send_grad(self, from_stage: int, chunk: int, t: torch.Tensor) -> None:
        raise NotImplementedError

    def recv_activation(self, to_stage: int, chunk: int, shape) -> torch.Tensor:
        raise NotImplementedError

    def recv_grad(self, to_stage: int, chunk: int, shape) -> torch.Tensor:
        raise NotImplementedError

    def finish(self) -> None:
        """Completes this rank's outstanding sends."""


class LocalLink(StageLink):
    """In-process mailbox; a receive of a tensor nobody sent is an error, never a wait."""

    def __init__(self):
        self._box: Dict[Tuple[int, int, int], torch.Tensor] = {}

    # The sender keeps no reference (executor: a stage's output is not kept): no copy needed.
    def send_activation(self, from_stage, chunk, t):
        self._box[(0, from_stage + 1, chunk)] = t.detach()

    def send_grad(self, from_stage, chunk, t):
        self._box[(1, from_stage - 1, chunk)] = t.detach()

    def _take(self, key, shape):
        if key not in self._box:
            raise RuntimeError(f"nothing was sent for {key}")
        t = self._box.pop(key)
        if tuple(t.shape) != tuple(shape):
            raise RuntimeError(f"{key}: received {tuple(t.shape)}, expected {tuple(shape)}")
        return t

    def recv_activation(self, to_stage, chunk, shape):
        return self._take((0, to_stage, chunk), shape)

    def recv_grad(self, to_stage, chunk, shape):
        return self._take((1, to_stage, chunk), shape)

    def ready(self, plan, action) -> bool:
        """Whether `action` of some rank would find its input here."""
        spec = plan.stages[action.stage]
        if action.kind == "forward":
            return spec.has_embedding or (0, action.stage, action.chunk) in self._box
        return spec.has_lm_head or (1, action.stage, action.chunk) in self._box


def channel_orders(plan, rank: int) -> Dict[Tuple[int, int, str], List[int]]:
    """(kind, boundary, "send" | "recv") -> the chunks rank `rank` sends or receives over that
    stage boundary (b joins stage b and b + 1; kind 0 activations, 1 gradients), in its order."""
    out: Dict[Tuple[int, int, str], List[int]] = {}
    last = len(plan.stages) - 1
    for a in plan.actions[rank]:
        if a.kind == "forward":
            if a.stage > 0:
                out.setdefault((0, a.stage - 1, "recv"), []).append(a.chunk)
            if a.stage < last:
                out.setdefault((0, a.stage, "send"), []).append(a.chunk)
        else:
            if a.stage < last:
                out.setdefault((1, a.stage, "recv"), []).append(a.chunk)
            if a.stage > 0:
                out.setdefault((1, a.stage - 1, "send"), []).append(a.chunk)
    return out


def check_channel_orders(plan) -> None:
    """NCCL matches point-to-point messages by order, not tag: over every boundary, each kind's
    chunks must leave the sender in the order the receiver takes them. RuntimeError naming the
    first boundary where they do not."""
    orders = [channel_orders(plan, r) for r in range(plan.pp)]
    for b in range(len(plan.stages) - 1):
        for kind, (src, dst) in ((0, (b, b + 1)), (1, (b + 1, b))):
            sent = orders[plan.stages[src].rank].get((kind, b, "send"), [])
            taken = orders[plan.stages[dst].rank].get((kind, b, "recv"), [])
            if sent != taken:
                what = "activations" if kind == 0 else "gradients"
                raise RuntimeError(
                    f"the plan's {what} between stages {b} and {b + 1} leave in the chunk order "
                    f"{sent[:8]}... and are taken in {taken[:8]}...; NCCL pairs messages by order: "
                    f"run this schedule over gloo (--device cpu) or report the plan")


class DistLink(StageLink):
    """Point-to-point between the ranks of one pipeline (one replica and position in its
    Ulysses group; distributed.RankGroups.rank_of). Each message carries a tag naming (kind,
    stage boundary, chunk); on NCCL, which ignores tags, each (kind, boundary) has a process
    group of its own, and check_channel_orders makes sure both ends take its messages in one
    order."""

    def __init__(self, plan, groups, dtype: torch.dtype):
        self.g, self.pp, self.num_stages = groups, plan.pp, len(plan.stages)
        self.device, self.dtype = groups.device, dtype
        self.groups = groups.link_groups or {}
        if groups.backend == "nccl":
            check_channel_orders(plan)
        self._pending: List[object] = []
        self._local = LocalLink()
        self.me = dist.get_rank()

    def world_rank(self, stage: int) -> int:
        return self.g.rank_of(stage % self.pp, self.g.replica, self.g.sp_rank)

    def _tag(self, kind: int, boundary: int, chunk: int) -> int:
        return (chunk * self.num_stages + boundary) * 2 + kind

    def _send(self, kind: int, boundary: int, to_stage: int, chunk: int, t: torch.Tensor):
        dst = self.world_rank(to_stage)
        if dst == self.me:
            box = self._local._box
            box[(kind, to_stage, chunk)] = t.detach()
            return
        t = t.detach().to(self.dtype).contiguous()
        group = self.groups.get((kind, boundary))
        work = dist.isend(t, dst, group=group, tag=self._tag(kind, boundary, chunk))
        self._reap()
        self._pending.append((work, t))

    def _reap(self) -> None:
        """Frees the tensors of the sends that completed (never waits)."""
        self._pending = [(w, t) for w, t in self._pending if not w.is_completed()]

    def _recv(self, kind: int, boundary: int, from_stage: int, to_stage: int, chunk: int, shape):
        src = self.world_rank(from_stage)
        if src == self.me:
            return self._local._take((kind, to_stage, chunk), shape)
        t = torch.empty(shape, dtype=self.dtype, device=self.device)
        group = self.groups.get((kind, boundary))
        dist.recv(t, src, group=group, tag=self._tag(kind, boundary, chunk))
        self._reap()
        return t

    # A boundary is named by its lower stage: b connects stage b and b + 1.
    def send_activation(self, from_stage, chunk, t):
        self._send(0, from_stage, from_stage + 1, chunk, t)

    def send_grad(self, from_stage, chunk, t):
        self._send(1, from_stage - 1, from_stage - 1, chunk, t)

    def recv_activation(self, to_stage, chunk, shape):
        return self._recv(0, to_stage - 1, to_stage - 1, to_stage, chunk, shape)

    def recv_grad(self, to_stage, chunk, shape):
        return self._recv(1, to_stage, to_stage + 1, to_stage, chunk, shape)

    def finish(self):
        for work, _ in self._pending:
            work.wait()
        self._pending.clear()
