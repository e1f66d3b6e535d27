"""Ulysses sequence parallelism inside a stage (DeepSpeed-Ulysses, as InfiniPipe runs it: SP
within a node, PP across). The u ranks of a stage's Ulysses group each hold a contiguous 1/u of
a chunk's tokens (the shares differ by at most one token) and every parameter. Around attention
an all-to-all trades tokens for heads: before it each rank has its tokens' queries, keys and
values of every head, after it every token of the chunk for its 1/u of the heads (and of the
key/value heads), so each sequence's causal attention, slices and context included, runs whole;
a second all-to-all trades back. Everything else (norms, projections, MLP, loss) runs on the
rank's tokens, and the parameters' gradients are summed over the group with the data-parallel
ones.

NCCL has all-to-all; gloo (PyTorch 1.13 on CPUs) has not, so there the exchange is point-to-point
sends and receives with every peer, the same maths.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
import torch.distributed as dist


def shard_bounds(n: int, u: int) -> List[Tuple[int, int]]:
    """Rows [lo, hi) of each of the u shares of n tokens, in order."""
    base, extra = divmod(n, u)
    out, lo = [], 0
    for k in range(u):
        hi = lo + base + (1 if k < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


class UlyssesGroup:
    """The Ulysses group of one stage of one replica: world ranks in group order, this rank's
    place, the torch.distributed group."""

    def __init__(self, ranks: Sequence[int], me: int, group, backend: str):
        self.ranks, self.me, self.group = list(ranks), me, group
        self.size = len(self.ranks)
        self.native = backend == "nccl"

    def exchange(self, pieces: List[torch.Tensor], shapes: List[Tuple[int, ...]]) -> List[torch.Tensor]:
        """pieces[j] goes to member j; returns what each member j sent here (of shapes[j])."""
        pieces = [p.contiguous() for p in pieces]
        out = [torch.empty(s, dtype=pieces[0].dtype, device=pieces[0].device) for s in shapes]
        if self.native:
            dist.all_to_all(out, pieces, group=self.group)
            return out
        works = []
        for j, r in enumerate(self.ranks):
            if j == self.me:
                out[j].copy_(pieces[j])
                continue
            works.append(dist.isend(pieces[j], r, group=self.group))
            works.append(dist.irecv(out[j], r, group=self.group))
        for w in works:
            w.wait()
        return out


def _scatter_heads(t: torch.Tensor, sp: UlyssesGroup, bounds) -> torch.Tensor:
    """(my rows, heads, d) -> (all rows, my heads, d)."""
    h = t.shape[1] // sp.size
    pieces = [t[:, j * h:(j + 1) * h] for j in range(sp.size)]
    shapes = [(hi - lo, h, t.shape[2]) for lo, hi in bounds]
    return torch.cat(sp.exchange(pieces, shapes))


def _gather_heads(t: torch.Tensor, sp: UlyssesGroup, bounds) -> torch.Tensor:
    """(all rows, my heads, d) -> (my rows, heads, d)."""
    lo, hi = bounds[sp.me]
    pieces = [t[a:b] for a, b in bounds]
    shapes = [(hi - lo, t.shape[1], t.shape[2])] * sp.size
    return torch.cat(sp.exchange(pieces, shapes), dim=1)


class _ScatterHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, sp, bounds):
        ctx.sp, ctx.bounds = sp, bounds
        return _scatter_heads(t, sp, bounds)

    @staticmethod
    def backward(ctx, grad):
        return _gather_heads(grad, ctx.sp, ctx.bounds), None, None


class _GatherHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, sp, bounds):
        ctx.sp, ctx.bounds = sp, bounds
        return _gather_heads(t, sp, bounds)

    @staticmethod
    def backward(ctx, grad):
        return _scatter_heads(grad, ctx.sp, ctx.bounds), None, None


class HeadExchange:
    """What a layer needs to run attention over a chunk whose tokens are spread over the group:
    the shares' bounds and the two all-to-alls, differentiable (each one's backward is the
    other)."""

    def __init__(self, sp: UlyssesGroup, num_tokens: int):
        self.sp = sp
        self.bounds = shard_bounds(num_tokens, sp.size)

    @property
    def rows(self) -> Tuple[int, int]:
        return self.bounds[self.sp.me]

    def to_heads(self, t: torch.Tensor) -> torch.Tensor:
        return _ScatterHeads.apply(t, self.sp, self.bounds)

    def to_tokens(self, t: torch.Tensor) -> torch.Tensor:
        return _GatherHeads.apply(t, self.sp, self.bounds)
