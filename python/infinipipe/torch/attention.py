"""Causal attention of one chunk: packed slices, each attending to its sequence's context (the
K/V of the sequence's earlier tokens on this stage and layer, if any) and causally to itself.

Which kernel serves it (chosen per call from the device and dtype; layouts cached per chunk):

* CUDA, bf16/fp16, PyTorch with ``torch.nn.attention.varlen``: the whole chunk in one varlen
  flash (or cuDNN) call; flash aligns the causal diagonal to the bottom right, which is exactly
  "after the context", and serves grouped-query heads without copies.
* CUDA otherwise (fp32: the memory-efficient kernel): one scaled_dot_product_attention call per
  slice, ``is_causal`` or ``causal_lower_right``; that kernel has no grouped-query support, so
  K/V heads are repeated there.
* CPU: PyTorch's CPU flash kernel. Slices under 128 tokens without context are grouped by
  length (powers of two) and each group runs as one padded batch with ``is_causal`` (padding
  sits after each sequence's last token, so no real query sees it); longer ones run alone, but
  adjacent ones of equal length as one batch (a view of the rows, as is any group without
  padding). A slice with context runs as two flash calls, the context without a mask and
  itself with ``is_causal``, merged by their log-sum-exp: the CPU kernel only knows the
  upper-left diagonal, and for ``causal_lower_right`` PyTorch would build the n x m mask.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

KV = Tuple[torch.Tensor, torch.Tensor]

# torch.nn.attention.bias and .varlen import TorchDynamo, which would double the start-up of
# every process that imports infinipipe.torch (about 1.3 s of CPU): both load on first use.


@functools.cache
def _causal_lower_right():
    from torch.nn.attention.bias import causal_lower_right
    return causal_lower_right


@functools.cache
def _varlen_attn():
    """torch.nn.attention.varlen.varlen_attn, or None on an older PyTorch (one call per
    slice)."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn
_sdpa = F.scaled_dot_product_attention
_cpu_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_cpu_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def choose_path(q: torch.Tensor) -> str:
    """'varlen' (one call per chunk), 'cpu' (length groups, log-sum-exp merge) or 'loop' (one
    call per slice)."""
    if q.device.type == "cpu":
        return "cpu"
    if q.device.type == "cuda" and q.dtype in (torch.float16, torch.bfloat16) \
            and _varlen_attn() is not None:
        return "varlen"
    return "loop"


def chunk_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    segments: Sequence[Tuple[int, int]],
                    contexts: Sequence[Optional[KV]]) -> torch.Tensor:
    """q (N, heads, d), k and v (N, kv_heads, d): a chunk's rows. segments[i] = (row, length)
    of slice i; contexts[i] None or the (c, kv_heads, d) K and V of its sequence before it.
    Returns (N, heads, d)."""
    if len(segments) != len(contexts):
        raise ValueError(f"attention: {len(segments)} slices but {len(contexts)} contexts")
    path = choose_path(q)
    if path == "varlen":
        return _varlen_chunk(q, k, v, segments, contexts)
    if path == "cpu":
        return _cpu_chunk(q, k, v, segments, contexts)
    return _loop_chunk(q, k, v, segments, contexts)


def _heads_first(t: torch.Tensor) -> torch.Tensor:
    """(n, heads, d) -> (1, heads, n, d), a view."""
    return t.transpose(0, 1).unsqueeze(0)


def _tokens_first(t: torch.Tensor) -> torch.Tensor:
    """(1, heads, n, d) -> (n, heads, d), a view."""
    return t.squeeze(0).transpose(0, 1)


# -- CUDA: varlen ----------------------------------------------------------------------------------

@functools.cache
def _varlen_causal_kwargs(kernel) -> Dict[str, object]:
    """Causal and grouped-query arguments as this PyTorch's varlen_attn spells them (its first
    release had is_causal, later ones a window)."""
    params = inspect.signature(kernel).parameters
    kwargs: Dict[str, object] = {"window_size": (-1, 0)} if "window_size" in params \
        else {"is_causal": True}
    if "enable_gqa" in params:
        kwargs["enable_gqa"] = True
    return kwargs


@functools.lru_cache(maxsize=16)
def _varlen_layout(segments: Tuple[Tuple[int, int, int], ...], device: torch.device):
    """Cumulative query and key offsets (int32 on the device) of (row, length, context) slices,
    built once per chunk: every layer reuses them."""
    cu_q, cu_k = [0], [0]
    for r, n, c in segments:
        if r != cu_q[-1]:
            raise ValueError(f"attention: a slice at row {r}, expected {cu_q[-1]} (slices follow "
                             f"each other from row 0)")
        cu_q.append(cu_q[-1] + n)
        cu_k.append(cu_k[-1] + c + n)
    pin = device.type == "cuda"
    tq = torch.tensor(cu_q, dtype=torch.int32, pin_memory=pin).to(device, non_blocking=True)
    tk = tq if cu_k == cu_q else \
        torch.tensor(cu_k, dtype=torch.int32, pin_memory=pin).to(device, non_blocking=True)
    max_q = max(n for _, n, _ in segments)
    max_k = max(c + n for _, n, c in segments)
    return tq, tk, max_q, max_k


def _varlen_chunk(q, k, v, segments, contexts):
    key = tuple((r, n, 0 if ctx is None else ctx[0].shape[0])
                for (r, n), ctx in zip(segments, contexts))
    cu_q, cu_k, max_q, max_k = _varlen_layout(key, q.device)
    if any(ctx is not None for ctx in contexts):
        # Each slice's keys are its context then itself: one copy of the chunk's K/V.
        ks, vs = [], []
        for (r, n), ctx in zip(segments, contexts):
            if ctx is not None:
                ks.append(ctx[0])
                vs.append(ctx[1])
            ks.append(k[r:r + n])
            vs.append(v[r:r + n])
        k, v = torch.cat(ks), torch.cat(vs)
    kernel = _varlen_attn()
    return kernel(q, k, v, cu_q, cu_k, max_q, max_k, scale=1.0 / math.sqrt(q.shape[-1]),
                  **_varlen_causal_kwargs(kernel))


# -- any device: one call per slice ---------------------------------------------------------------

def _loop_chunk(q, k, v, segments, contexts):
    heads, kv_heads = q.shape[1], k.shape[1]
    # The memory-efficient kernel (CUDA fp32) has no grouped-query support: repeat the heads.
    repeat = heads // kv_heads if q.dtype == torch.float32 and heads != kv_heads else 1
    outs = []
    for (r, n), ctx in zip(segments, contexts):
        ks, vs = k[r:r + n], v[r:r + n]
        if ctx is not None:
            ks, vs = torch.cat([ctx[0], ks]), torch.cat([ctx[1], vs])
        if repeat > 1:
            ks, vs = ks.repeat_interleave(repeat, dim=1), vs.repeat_interleave(repeat, dim=1)
        mask = None if ctx is None else _causal_lower_right()(n, ks.shape[0])
        out = _sdpa(_heads_first(q[r:r + n]), _heads_first(ks), _heads_first(vs),
                    attn_mask=mask, is_causal=mask is None, enable_gqa=ks.shape[1] != heads)
        outs.append(_tokens_first(out))
    return torch.cat(outs)


# -- CPU ------------------------------------------------------------------------------------------

# Slices this long run alone: padding them costs more than a call (measured on the test
# model's chunks, docs/python.md).
_GROUP_BELOW = 128


class _CpuPlan:
    """How a chunk's slices run on the CPU, built once per chunk (every layer reuses it): short
    slices without context grouped by length class (the next power of two; a group of several
    is one padded batch, its padding rows gathered from the slice's first row), longer ones
    alone except runs of adjacent equal-length ones (one batch), then each slice with context;
    a group of equal-length adjacent slices is a view (gather None), not a gathered copy.
    `order` takes the concatenated outputs' rows to the chunk's rows (None where they already
    are in order)."""

    def __init__(self, segments: Tuple[Tuple[int, int, bool], ...]):
        classes: Dict[object, List[Tuple[int, int]]] = {}
        run_key, run_end, run_n = None, -1, 0
        for r, n, has_context in segments:
            if has_context:
                run_key = None
                continue
            if n < _GROUP_BELOW:
                key = 1 << (n - 1).bit_length()
            elif run_key is not None and r == run_end and n == run_n:
                key = run_key
            else:
                key = ("long", r)
            run_key, run_end, run_n = (key, r + n, n) if n >= _GROUP_BELOW else (None, -1, 0)
            classes.setdefault(key, []).append((r, n))
        self.groups: List[Tuple[List[Tuple[int, int]], int, Optional[torch.Tensor]]] = []
        order = [0] * sum(n for _, n, _ in segments)
        at = 0
        for members in classes.values():
            length = max(n for _, n in members)
            gather = None
            if not all(n == length and r == members[0][0] + i * length
                       for i, (r, n) in enumerate(members)):
                index = []
                for r, n in members:
                    index += list(range(r, r + n)) + [r] * (length - n)
                gather = torch.tensor(index, dtype=torch.long)
            for i, (r, n) in enumerate(members):
                order[r:r + n] = range(at + i * length, at + i * length + n)
            at += len(members) * length
            self.groups.append((members, length, gather))
        self.with_context = [(r, n) for r, n, has_context in segments if has_context]
        for r, n in self.with_context:
            order[r:r + n] = range(at, at + n)
            at += n
        self.order = None if order == list(range(len(order))) and at == len(order) \
            else torch.tensor(order, dtype=torch.long)


@functools.lru_cache(maxsize=16)
def _cpu_plan(segments: Tuple[Tuple[int, int, bool], ...]) -> _CpuPlan:
    return _CpuPlan(segments)


def _cpu_chunk(q, k, v, segments, contexts):
    plan = _cpu_plan(tuple((r, n, ctx is not None) for (r, n), ctx in zip(segments, contexts)))
    q4, k4, v4 = _heads_first(q), _heads_first(k), _heads_first(v)
    pieces = []
    for members, length, gather in plan.groups:
        if len(members) == 1:  # one slice: views, no padding
            r, n = members[0]
            out = _sdpa(q4[:, :, r:r + n], k4[:, :, r:r + n], v4[:, :, r:r + n],
                        is_causal=True, enable_gqa=True)
            pieces.append(_tokens_first(out))
        else:
            b, r = len(members), members[0][0]
            # Adjacent equal-length slices are a view of the rows; others are gathered.
            qb, kb, vb = ((t[r:r + b * length] if gather is None else t.index_select(0, gather))
                          .unflatten(0, (b, length)).transpose(1, 2) for t in (q, k, v))
            out = _sdpa(qb, kb, vb, is_causal=True, enable_gqa=True)
            pieces.append(out.transpose(1, 2).reshape(b * length, q.shape[1], q.shape[2]))
    contexts = [ctx for ctx in contexts if ctx is not None]
    for (r, n), ctx in zip(plan.with_context, contexts):
        out = _ContextThenCausal.apply(q4[:, :, r:r + n], _heads_first(ctx[0]),
                                       _heads_first(ctx[1]), k4[:, :, r:r + n],
                                       v4[:, :, r:r + n])
        pieces.append(_tokens_first(out))
    out = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
    return out if plan.order is None else out.index_select(0, plan.order)


class _ContextThenCausal(torch.autograd.Function):
    """Softmax attention of queries over [context, own keys]: the context in full, the own keys
    causally (query i sees own keys <= i). Two CPU flash calls merged by their log-sum-exp; the
    backward runs each part's flash backward against the merged output and log-sum-exp, which is
    exactly the gradient of the merged softmax. Tensors (1, heads, tokens, d)."""

    @staticmethod
    def forward(ctx, q, kc, vc, ks, vs):
        scale = 1.0 / math.sqrt(q.shape[-1])
        out_c, lse_c = _cpu_flash(q, kc, vc, 0.0, False, scale=scale)
        out_s, lse_s = _cpu_flash(q, ks, vs, 0.0, True, scale=scale)
        lse = torch.logaddexp(lse_c, lse_s)
        at_least_fp32 = torch.promote_types(q.dtype, torch.float32)
        out = (out_c.to(at_least_fp32) * torch.exp(lse_c - lse).unsqueeze(-1)
               + out_s.to(at_least_fp32) * torch.exp(lse_s - lse).unsqueeze(-1)).to(q.dtype)
        ctx.save_for_backward(q, kc, vc, ks, vs, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad):
        q, kc, vc, ks, vs, out, lse = ctx.saved_tensors
        grad = grad.contiguous()
        dq_c, dkc, dvc = _cpu_flash_backward(grad, q, kc, vc, out, lse, 0.0, False,
                                             scale=ctx.scale)
        dq_s, dks, dvs = _cpu_flash_backward(grad, q, ks, vs, out, lse, 0.0, True,
                                             scale=ctx.scale)
        return dq_c + dq_s, dkc, dvc, dks, dvs


# -- the GPU check's preflight --------------------------------------------------------------------

def _reference(q, k, v, segments, contexts) -> torch.Tensor:
    """Explicit masked softmax in fp32, slice by slice: what the kernels must equal."""
    outs = []
    group = q.shape[1] // k.shape[1]
    for (r, n), ctx in zip(segments, contexts):
        ks, vs = k[r:r + n], v[r:r + n]
        if ctx is not None:
            ks, vs = torch.cat([ctx[0], ks]), torch.cat([ctx[1], vs])
        ks, vs = (t.float().repeat_interleave(group, dim=1) for t in (ks, vs))
        scores = torch.einsum("nhd,mhd->hnm", q[r:r + n].float(), ks) / math.sqrt(q.shape[-1])
        m = ks.shape[0]
        allowed = torch.arange(m, device=q.device)[None, :] \
            <= torch.arange(n, device=q.device)[:, None] + (m - n)
        scores = scores.masked_fill(~allowed, float("-inf"))
        outs.append(torch.einsum("hnm,mhd->nhd", scores.softmax(-1), vs))
    return torch.cat(outs)


_KERNEL_NAMES = ("flash_attention", "efficient_attention", "cudnn_attention", "attention_math",
                 "varlen_attn", "flex_attention")


def kernel_preflight(device, dtype: torch.dtype) -> Dict[str, object]:
    """Runs chunk_attention on `device` in `dtype` once per case, forward and backward, under
    sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION]) (no math fallback), and
    compares output and gradients with an explicit fp32 softmax. Cases: 'packed' (whole
    sequences of one chunk) and 'context' (a chunk with a slice after a 300-token context), both
    with grouped-query heads (8 query, 2 key/value heads, head_dim 64). Returns {'path':
    choose_path's answer, 'packed' and 'context': the attention operators that served the case,
    'max_error': the largest error relative to the reference's largest value}. Raises
    RuntimeError when a case needs the math path or misses the reference (1e-3 in fp32, 3e-2 in
    16-bit types)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(device)
    generator = torch.Generator().manual_seed(0)
    heads, kv_heads, d = 8, 2, 64
    tolerance = 1e-3 if dtype == torch.float32 else 3e-2
    cases = {"packed": ([40, 7, 100, 1, 64], [0, 0, 0, 0, 0]),
             "context": ([40, 7, 100], [0, 0, 300])}
    result: Dict[str, object] = {"max_error": 0.0}

    def rand(*shape):
        t = torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)
        return t.requires_grad_()

    for case, (lengths, context_lengths) in cases.items():
        n = sum(lengths)
        segments = [(sum(lengths[:i]), length) for i, length in enumerate(lengths)]
        q, k, v = rand(n, heads, d), rand(n, kv_heads, d), rand(n, kv_heads, d)
        contexts = [None if c == 0 else (rand(c, kv_heads, d), rand(c, kv_heads, d))
                    for c in context_lengths]
        leaves = [q, k, v] + [t for ctx in contexts if ctx is not None for t in ctx]
        grad = torch.randn(n, heads, d, generator=generator).to(device=device, dtype=dtype)
        backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.CUDNN_ATTENTION]
        try:
            with sdpa_kernel(backends), profile(activities=[ProfilerActivity.CPU]) as prof:
                out = chunk_attention(q, k, v, segments, contexts)
                got = [out] + list(torch.autograd.grad(out, leaves, grad))
        except RuntimeError as e:
            raise RuntimeError(f"attention preflight ({device}, {dtype}, {case}): no fused "
                               f"kernel served it: {e}") from e
        kernels = sorted({e.name for e in prof.events()
                          if any(name in e.name for name in _KERNEL_NAMES)})
        if any("math" in name for name in kernels):
            raise RuntimeError(f"attention preflight ({device}, {dtype}, {case}): the math path "
                               f"ran ({', '.join(kernels)})")
        ref_leaves = [t.detach().float().requires_grad_() for t in leaves]
        rq, rk, rv = ref_leaves[:3]
        ref_contexts, at = [], 3
        for ctx in contexts:
            ref_contexts.append(None if ctx is None else tuple(ref_leaves[at:at + 2]))
            at += 0 if ctx is None else 2
        ref = _reference(rq, rk, rv, segments, ref_contexts)
        want = [ref] + list(torch.autograd.grad(ref, ref_leaves, grad.float()))
        for g, w in zip(got, want):
            w = w.detach()
            err = float((g.detach().float() - w).abs().max() / w.abs().max().clamp_min(1e-30))
            result["max_error"] = max(result["max_error"], err)
            if err > tolerance:
                raise RuntimeError(f"attention preflight ({device}, {dtype}, {case}): error "
                                   f"{err:.2e} against the fp32 reference (tolerance "
                                   f"{tolerance:g})")
        result[case] = kernels
    result["path"] = choose_path(torch.empty(0, device=device, dtype=dtype))
    return result
