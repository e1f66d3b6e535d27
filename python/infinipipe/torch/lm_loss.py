"""The LM head's loss in blocks of rows, as the cost model prices it (docs/cost-model.md, "Memory
of a stage": `logits_block_tokens` = 1024 rows of fp32 logits in forward, recomputed block by
block in backward), never the whole logits: 32K tokens x 128K vocabulary would be 16 GiB."""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOGITS_BLOCK_TOKENS = 1024  # the cost model's logits_block_tokens


def _loss_dtype(h: torch.Tensor) -> torch.dtype:
    """At least fp32 (float64 stays float64)."""
    return torch.promote_types(h.dtype, torch.float32)


def _logits(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    # bf16: the GEMM's half-size output, then fp32
    return F.linear(h, weight).to(_loss_dtype(h))


class BlockedLmLoss(torch.autograd.Function):
    """Sum over rows whose target is >= 0 of -log softmax(h W^T)[target]. Forward holds one
    block's fp32 logits, turned into exp() in place; backward recomputes each block's logits,
    turns them into the logits' gradient in place, and adds that block's share of dh and dW."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                block: int) -> torch.Tensor:
        total = torch.zeros((), dtype=_loss_dtype(h), device=h.device)
        for a in range(0, h.shape[0], block):
            logits, t = _logits(h[a:a + block], weight), targets[a:a + block]
            top = logits.amax(-1, keepdim=True)
            picked = logits.gather(1, t.clamp(min=0)[:, None])
            lse = logits.sub_(top).exp_().sum(-1, keepdim=True).log_().add_(top)
            total += ((lse - picked).squeeze(1) * (t >= 0)).sum()
        ctx.save_for_backward(h, weight, targets)
        ctx.block = block
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        h, weight, targets = ctx.saved_tensors
        dh = torch.empty_like(h)
        # One block: its dW is the gradient, no accumulation buffer. (Autograd would allocate a
        # weight-sized gradient for any linear layer too.)
        dw = None
        for a in range(0, h.shape[0], ctx.block):
            hb, t = h[a:a + ctx.block], targets[a:a + ctx.block]
            d = _logits(hb, weight)
            d.sub_(d.amax(-1, keepdim=True)).exp_()
            d.div_(d.sum(-1, keepdim=True))  # softmax
            valid = (t >= 0).to(d.dtype)
            d.scatter_add_(1, t.clamp(min=0)[:, None], -valid[:, None])
            d.mul_((valid * grad)[:, None])
            d = d.to(h.dtype)
            torch.mm(d, weight, out=dh[a:a + ctx.block])
            if dw is None:
                dw = torch.mm(d.t(), hb)
            else:
                dw.addmm_(d.t(), hb)
        return dh, dw, None, None


def lm_loss(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
            block: int = LOGITS_BLOCK_TOKENS) -> torch.Tensor:
    """Sum of the token losses of `h` (rows, hidden) under the head `weight` (vocab, hidden);
    rows whose target is -1 predict nothing."""
    return BlockedLmLoss.apply(h, weight, targets, block)
