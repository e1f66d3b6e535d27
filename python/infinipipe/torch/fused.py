"""RMSNorm, rotary embedding and SwiGLU as autograd Functions that save for backward what the
cost model counts per layer (docs/cost-model.md, "Memory of a stage"; the fused kernels of
Megatron-LM / Transformer Engine): a norm keeps its input and fp32 rstd (the next GEMM keeps its
output), the rotation keeps nothing but the chunk's shared cos/sin, SwiGLU keeps gate and up (the
down projection keeps its output). Composed of plain ops, autograd would also keep fp32 copies
(bf16), the normalised input, the unrotated q/k and SiLU's output. The maths are the plain ops'."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class RmsNorm(torch.autograd.Function):
    """weight * (x / rms(x)), normalised in fp32 and cast to x's dtype before the weight."""

    @staticmethod
    def forward(ctx, x, weight, eps: float):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return weight * (xf * rstd).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        xhat = torch.mul(x, rstd)  # fp32 (rstd is)
        dweight = (grad * xhat.to(x.dtype)).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
        dxhat = torch.mul(grad, weight).float()
        mean = (dxhat * xhat).mean(-1, keepdim=True)
        dx = dxhat.sub_(xhat.mul_(mean)).mul_(rstd)  # rstd (dxhat - xhat mean), in place
        return dx.to(x.dtype), dweight, None


def _rotation(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sign: float) -> torch.Tensor:
    """x cos + sign · rotate_half(x) sin in fp32, cast back, with two buffers: Hugging Face's
    rotate_half(x) = [-x2, x1], and sin's two halves are equal (Rotary.cos_sin repeats them)."""
    xf = x.float()
    out, t = xf * cos, xf * sin
    half = x.shape[-1] // 2
    out[..., :half].sub_(t[..., half:], alpha=sign)
    out[..., half:].add_(t[..., :half], alpha=sign)
    return out.to(x.dtype)


class Rotary(torch.autograd.Function):
    """x cos + rotate_half(x) sin; x (n, heads, d), cos/sin (n, 1, d)."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rotation(x, cos, sin, 1.0)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        # The transpose of rotate_half is -rotate_half.
        return _rotation(grad, cos, sin, -1.0), None, None


class SwiGlu(torch.autograd.Function):
    """silu(gate) * up."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return F.silu(gate).mul_(up)  # one buffer: no graph is recorded in here

    @staticmethod
    def backward(ctx, grad):
        gate, up = ctx.saved_tensors
        # ATen's fused SiLU backward: one pass, silu' in fp32 even for bf16 (faster than
        # composing sigmoid and in-place products).
        dgate = torch.ops.aten.silu_backward(grad * up, gate)
        dup = F.silu(gate).mul_(grad)
        return dgate, dup


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return RmsNorm.apply(x, weight, eps)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return Rotary.apply(x, cos, sin)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return SwiGlu.apply(gate, up)
