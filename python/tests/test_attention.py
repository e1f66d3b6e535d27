"""infinipipe.torch.attention: every path equals the explicit-mask attention it replaced (fp32,
1e-5, forward and backward), a slice after a long context runs in bounded memory on the CPU, the
CPU groups a chunk's slices into few calls, the CUDA varlen path makes one call per chunk (its
kernel modelled here by flash's documented semantics), and older PyTorch is refused."""

import functools
import json
import math
import os
import tempfile
import unittest
from unittest import mock

import torch
from torch.profiler import ProfilerActivity, profile

import infinipipe.torch as ip_torch
from infinipipe.torch import attention

MiB = 1 << 20


def explicit_attention(q, k, v, segments, contexts):
    """The previous implementation: per slice, K/V copied to every query head, an explicit
    n x m mask (key j visible to query i when j <= context + i), softmax in fp32."""
    outs = []
    for (r, n), ctx in zip(segments, contexts):
        ks, vs = k[r:r + n], v[r:r + n]
        if ctx is not None:
            ks, vs = torch.cat([ctx[0], ks]), torch.cat([ctx[1], vs])
        group = q.shape[1] // ks.shape[1]
        ks, vs = ks.repeat_interleave(group, dim=1), vs.repeat_interleave(group, dim=1)
        m = ks.shape[0]
        mask = torch.arange(m)[None, :] <= torch.arange(n)[:, None] + (m - n)
        scores = torch.einsum("nhd,mhd->hnm", q[r:r + n], ks) / math.sqrt(q.shape[-1])
        probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        outs.append(torch.einsum("hnm,mhd->nhd", probs, vs))
    return torch.cat(outs)


def flash_varlen_model(q, k, v, cu_q, cu_k, max_q, max_k, scale=None, window_size=(-1, -1),
                       enable_gqa=False, is_causal=False):
    """What torch.nn.attention.varlen.varlen_attn computes with a causal window: per sequence,
    the causal diagonal aligned to the bottom right (flash's convention)."""
    assert window_size == (-1, 0) or is_causal
    assert enable_gqa or q.shape[1] == k.shape[1]
    outs = []
    for i in range(len(cu_q) - 1):
        qs = q[int(cu_q[i]):int(cu_q[i + 1])]
        ks, vs = k[int(cu_k[i]):int(cu_k[i + 1])], v[int(cu_k[i]):int(cu_k[i + 1])]
        assert qs.shape[0] <= max_q and ks.shape[0] <= max_k
        outs.append(explicit_attention(qs, ks[-qs.shape[0]:], vs[-qs.shape[0]:],
                                       [(0, qs.shape[0])],
                                       [None if ks.shape[0] == qs.shape[0] else
                                        (ks[:-qs.shape[0]], vs[:-qs.shape[0]])]))
    return torch.cat(outs)


def make_chunk(lengths, context_lengths, heads, kv_heads, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = sum(lengths)

    def rand(*shape):
        return torch.randn(*shape, generator=g).requires_grad_()

    segments = [(sum(lengths[:i]), length) for i, length in enumerate(lengths)]
    q, k, v = rand(n, heads, d), rand(n, kv_heads, d), rand(n, kv_heads, d)
    contexts = [None if c == 0 else (rand(c, kv_heads, d), rand(c, kv_heads, d))
                for c in context_lengths]
    return q, k, v, segments, contexts


CASES = {
    "whole sequences": ([256, 40, 17, 200, 5, 96, 2, 130, 64, 31, 150, 77, 1], None, 4, 4),
    "whole sequences, GQA": ([256, 40, 17, 200, 5, 96, 2, 130, 64, 31, 150, 77, 1], None, 4, 2),
    "one slice with context, GQA": ([96], [300], 4, 2),
    "packed chunk and slices, GQA": ([33, 7, 120, 1, 9, 64, 40], [0, 0, 0, 0, 50, 0, 16], 8, 2),
    "runs of equal lengths, GQA": ([64, 64, 64, 200, 200, 200, 150, 200, 200, 200, 200],
                                   [0] * 8 + [30, 0, 0], 4, 2),
}


class MatchesExplicitAttention(unittest.TestCase):
    def check(self, path):
        for name, (lengths, context_lengths, heads, kv_heads) in CASES.items():
            with self.subTest(case=name, path=path):
                q, k, v, segments, contexts = make_chunk(
                    lengths, context_lengths or [0] * len(lengths), heads, kv_heads)
                leaves = [q, k, v] + [t for ctx in contexts if ctx is not None for t in ctx]
                grad = torch.randn(q.shape, generator=torch.Generator().manual_seed(1))
                out = attention.chunk_attention(q, k, v, segments, contexts)
                got = [out] + list(torch.autograd.grad(out, leaves, grad))
                ref = explicit_attention(q, k, v, segments, contexts)
                want = [ref] + list(torch.autograd.grad(ref, leaves, grad))
                for label, a, b in zip(["out", "dq", "dk", "dv", "dk ctx", "dv ctx"] * 9,
                                       got, want):
                    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=label)

    def test_cpu_path(self):
        self.assertEqual(attention.choose_path(torch.empty(1)), "cpu")
        self.check("cpu")

    def test_per_slice_path(self):
        with mock.patch.object(attention, "choose_path", return_value="loop"):
            self.check("loop")

    def test_varlen_path_is_one_call(self):
        calls = []

        @functools.wraps(flash_varlen_model)  # its signature: the arguments a PyTorch offers
        def kernel(*args, **kwargs):
            calls.append(1)
            return flash_varlen_model(*args, **kwargs)

        with mock.patch.object(attention, "choose_path", return_value="varlen"), \
                mock.patch.object(attention, "_varlen_attn", lambda: kernel):
            self.check("varlen")
        self.assertEqual(len(calls), len(CASES))  # one per chunk, whatever its slices


def sdpa_batch_sizes(q, k, v, segments, contexts):
    """The batch size of every scaled_dot_product_attention call of one chunk's attention."""
    calls = []
    real = attention._sdpa

    def counted(*args, **kwargs):
        calls.append(args[0].shape[0])
        return real(*args, **kwargs)

    with mock.patch.object(attention, "_sdpa", counted):
        attention.chunk_attention(q, k, v, segments, contexts)
    return calls


class CpuCalls(unittest.TestCase):
    def test_slices_grouped_by_length_class(self):
        lengths = [3, 4, 5, 6, 7, 8, 30, 31, 100, 90]  # classes 4, 8, 32, 128
        calls = sdpa_batch_sizes(*make_chunk(lengths, [0] * 8 + [20, 0], 4, 2))
        # Batch sizes: a call per class; the slice with context runs the merged flash pair.
        self.assertEqual(sorted(calls), [1, 2, 2, 4])

    def test_adjacent_equal_slices_are_one_batch_of_views(self):
        lengths, context_lengths = CASES["runs of equal lengths, GQA"][:2]
        q, k, v, segments, contexts = make_chunk(lengths, context_lengths, 4, 2)
        calls = sdpa_batch_sizes(q, k, v, segments, contexts)
        # 3 x 64 (a class without padding), 3 x 200, 150, 200 (then a slice with context
        # ends the run), 2 x 200.
        self.assertEqual(calls, [3, 3, 1, 1, 2])
        plan = attention._cpu_plan(tuple((r, n, c > 0) for (r, n), c
                                         in zip(segments, context_lengths)))
        self.assertEqual([gather is None for _, _, gather in plan.groups], [True] * 5)


class SliceMemory(unittest.TestCase):
    def test_8k_queries_after_24k_context(self):
        """One slice of 8192 queries after 24576 context tokens (32768 keys), 4 heads, fp32,
        forward and backward: PyTorch's CPU allocator total, inputs and gradients included."""
        n, c, heads, d = 8192, 24576, 4, 32
        g = torch.Generator().manual_seed(0)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            q, k, v = (torch.randn(n, heads, d, generator=g).requires_grad_() for _ in range(3))
            kc, vc = (torch.randn(c, heads, d, generator=g).requires_grad_() for _ in range(2))
            out = attention.chunk_attention(q, k, v, [(0, n)], [(kc, vc)])
            out.backward(torch.ones_like(out))
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(trace)
            with open(trace) as f:
                events = [e["args"] for e in json.load(f)["traceEvents"]
                          if e.get("name") == "[memory]"]
        peak = max(e["Total Allocated"] for e in events)
        largest = max(e["Bytes"] for e in events)
        self.assertLess(peak, 300 * MiB)
        # Nothing the size of an n x m mask, even at one bit per entry.
        self.assertLess(largest, n * (n + c) // 8)
        # The math path would keep fp32 scores of heads x n x m: 4 GiB, more than 10x this peak.
        math_scores = heads * n * (n + c) * 4
        self.assertEqual(math_scores, 4096 * MiB)
        self.assertGreater(math_scores, 10 * peak)
        for t in (q, kc, vc):
            self.assertTrue(bool(t.grad.isfinite().all()))


class Preflight(unittest.TestCase):
    def test_cpu_preflight_without_math(self):
        result = attention.kernel_preflight("cpu", torch.float32)
        self.assertEqual(result["path"], "cpu")
        for case in ("packed", "context"):
            self.assertTrue(result[case])
            self.assertFalse([name for name in result[case] if "math" in name])
        self.assertLess(result["max_error"], 1e-5)


class VersionCheck(unittest.TestCase):
    def test_older_pytorch_refused(self):
        for version in ("1.13.1", "2.4.1+cu121", "unknown"):
            with self.assertRaises(ImportError) as e:
                ip_torch.require_torch(version)
            self.assertIn(version, str(e.exception))
            self.assertIn("2.5", str(e.exception))
            self.assertIn("scripts/install-deps.sh", str(e.exception))
        for version in ("2.5.0", "2.15.0+cu132", "3.0.0"):
            ip_torch.require_torch(version)


if __name__ == "__main__":
    unittest.main()
