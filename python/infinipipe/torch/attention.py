"""Causal attention of one slice: its queries against its sequence's context (the K/V of the
sequence's earlier tokens, on this stage and layer) and its own K/V.

Where the installed PyTorch has ``scaled_dot_product_attention`` (2.0 and later) it is used: a
slice without context (a whole sequence, or a sequence's first slice) is plain causal attention
(``is_causal=True``: the flash kernel on a GPU for bf16/fp16, the memory-efficient one
otherwise); a slice with context needs a causal mask shifted by the context's length, which
PyTorch serves with the memory-efficient kernel (or its math path where that kernel does not
apply). Without it (Debian's PyTorch 1.13), an explicit masked softmax in float32.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_SDPA = getattr(F, "scaled_dot_product_attention", None)


def _expand_kv(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(m, kv_heads, d) -> (m, heads, d): each key/value head serves heads / kv_heads queries."""
    group = heads // t.shape[1]
    return t if group == 1 else t.repeat_interleave(group, dim=1)


def _shifted_causal_mask(n: int, m: int, device) -> torch.Tensor:
    """True where query i (position context + i) may attend key j: j <= context + i."""
    context = m - n
    q = torch.arange(n, device=device)[:, None]
    k = torch.arange(m, device=device)[None, :]
    return k <= q + context


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, context: int) -> torch.Tensor:
    """q (n, heads, d); k, v (context + n, kv_heads, d), the context first. Returns (n, heads, d)."""
    n, heads, d = q.shape
    m = k.shape[0]
    if m != context + n:
        raise ValueError(f"attention: {m} keys for {n} queries after a context of {context}")
    k, v = _expand_kv(k, heads), _expand_kv(v, heads)
    qh, kh, vh = (t.transpose(0, 1) for t in (q, k, v))  # (heads, tokens, d)
    if _SDPA is not None:
        if context == 0:
            out = _SDPA(qh, kh, vh, is_causal=True)
        else:
            out = _SDPA(qh, kh, vh, attn_mask=_shifted_causal_mask(n, m, q.device))
        return out.transpose(0, 1)
    scores = torch.matmul(qh.float(), kh.float().transpose(1, 2)) / math.sqrt(d)
    scores = scores.masked_fill(~_shifted_causal_mask(n, m, q.device), float("-inf"))
    out = torch.matmul(torch.softmax(scores, dim=-1), vh.float())
    return out.to(q.dtype).transpose(0, 1)
