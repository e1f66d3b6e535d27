"""Ulysses sequence parallelism inside a stage (DeepSpeed-Ulysses, as InfiniPipe runs it: SP
within a node, PP across). The u ranks of a stage's Ulysses group each hold a contiguous 1/u of
a chunk's tokens (the shares differ by at most one token) and every parameter. Around attention
an all-to-all trades tokens for heads: before it each rank has its tokens' queries, keys and
values of every head, after it every token of the chunk for its 1/u of the heads (and of the
key/value heads), so each sequence's causal attention, slices and context included, runs whole;
a second all-to-all trades back. Everything else (norms, projections, MLP, loss) runs on the
rank's tokens, and the parameters' gradients are summed over the group with the data-parallel
ones.

Both exchanges are one all_to_all_single each, whose uneven splits (shares differing by a token)
NCCL and gloo both take, so the CPU tests run the very call a GPU makes; the list form
(all_to_all) is NCCL's only: gloo requires equal shapes.
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
    place, the torch.distributed group. Every backend runs all_to_all_single (gloo takes uneven
    splits too), so the CPU runs the GPU's call."""

    def __init__(self, ranks: Sequence[int], me: int, group):
        self.ranks, self.me, self.group = list(ranks), me, group
        self.size = len(self.ranks)

    def exchange(self, t: torch.Tensor, send_rows: List[int], recv_rows: List[int]) -> torch.Tensor:
        """t's rows, split by send_rows, go to the members in order; returns what the members
        sent here, in member order (recv_rows[j] rows from member j)."""
        out = t.new_empty((sum(recv_rows),) + tuple(t.shape[1:]))
        dist.all_to_all_single(out, t.contiguous(), output_split_sizes=recv_rows,
                               input_split_sizes=send_rows, group=self.group)
        return out


def _scatter_heads(t: torch.Tensor, sp: UlyssesGroup, bounds) -> torch.Tensor:
    """(my rows, heads, d) -> (all rows, my heads, d): member j gets heads [j h, (j + 1) h)."""
    u, rows, heads, d = sp.size, t.shape[0], t.shape[1], t.shape[2]
    h = heads // u
    by_member = t.reshape(rows, u, h, d).transpose(0, 1).reshape(u * rows, h, d)
    return sp.exchange(by_member, [rows] * u, [hi - lo for lo, hi in bounds])


def _gather_heads(t: torch.Tensor, sp: UlyssesGroup, bounds) -> torch.Tensor:
    """(all rows, my heads, d) -> (my rows, heads, d)."""
    u, h, d = sp.size, t.shape[1], t.shape[2]
    lo, hi = bounds[sp.me]
    got = sp.exchange(t, [b - a for a, b in bounds], [hi - lo] * u)
    return got.reshape(u, hi - lo, h, d).transpose(0, 1).reshape(hi - lo, u * h, d)


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
