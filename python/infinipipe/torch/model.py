"""The Llama model as PyTorch modules with Hugging Face parameter names, split into the stages of
a plan (a contiguous range of layers; the first holds the embedding, the last the final norm and
the LM head). A stage runs *chunks*: packed whole sequences and slices of sequences, each
sequence attending only to itself, a slice also to the K/V of its sequence's earlier slices (its
context). The maths follow the C++ engine (src/model): RMSNorm, rotary embeddings with
Hugging Face's rotate_half, grouped-query attention, SwiGLU, the loss summed over the predicted
tokens and scaled by 1 / (predicted tokens of the global batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from infinipipe.torch import fused
from infinipipe.torch.attention import chunk_attention
from infinipipe.torch.lm_loss import lm_loss


@dataclass(frozen=True)
class SliceRows:
    """One slice of a chunk: tokens [offset, offset + length) of sequence `seq`, at rows
    [row, row + length) of the chunk's tensors."""

    seq: int
    offset: int
    length: int
    seq_len: int
    row: int

    @property
    def is_final(self) -> bool:
        return self.offset + self.length == self.seq_len


def chunk_rows(chunk) -> List[SliceRows]:
    """The rows of an infinipipe.Chunk's slices, in the plan's order."""
    rows, row = [], 0
    for s in chunk.slices:
        rows.append(SliceRows(s.seq, s.offset, s.len, s.seq_len, row))
        row += s.len
    return rows


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return fused.rms_norm(x, weight, eps)


class Rotary:
    """cos and sin of each token's position (Hugging Face's layout: the two halves repeat)."""

    def __init__(self, head_dim: int, base: float, device: torch.device):
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim
        self.inv_freq = 1.0 / (base**exponents)

    def cos_sin(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos()[:, None, :], emb.sin()[:, None, :]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return fused.rotate(x, cos, sin)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)


class Mlp(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(fused.swiglu(self.gate_proj(x), self.up_proj(x)))


class DecoderLayer(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.input_layernorm = RMSNorm(model.hidden_size, model.norm_epsilon)
        self.self_attn = Attention(model.hidden_size, model.num_attention_heads,
                                   model.num_key_value_heads)
        self.post_attention_layernorm = RMSNorm(model.hidden_size, model.norm_epsilon)
        self.mlp = Mlp(model.hidden_size, model.ffn_hidden_size)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                rows: Sequence[SliceRows],
                contexts: Sequence[Optional[Tuple[torch.Tensor, torch.Tensor]]],
                exchange=None):
        """x (N, C) of one chunk. contexts[i]: the K/V (m, kv_heads, head_dim) of slice i's
        sequence before it, or None. Returns the layer's output and the chunk's K (after the
        rotation) and V, which later slices of a cut sequence attend to.
        With Ulysses (`exchange`, ulysses.HeadExchange) x holds this rank's share of the chunk's
        tokens, cos and sin theirs; attention runs over every token for this rank's heads, and
        K, V and the contexts are every token's for those heads."""
        n = x.shape[0]
        a = self.self_attn
        h = self.input_layernorm(x)
        q = rotate(a.q_proj(h).view(n, a.heads, a.head_dim), cos, sin)
        k = rotate(a.k_proj(h).view(n, a.kv_heads, a.head_dim), cos, sin)
        v = a.v_proj(h).view(n, a.kv_heads, a.head_dim)
        if exchange is not None:
            q, k, v = exchange.to_heads(q), exchange.to_heads(k), exchange.to_heads(v)
        attn = chunk_attention(q, k, v, [(r.row, r.length) for r in rows], contexts)
        if exchange is not None:
            attn = exchange.to_tokens(attn)
        attn = attn.reshape(n, a.heads * a.head_dim)
        x = x + a.o_proj(attn)
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, k, v


class Decoder(nn.Module):
    """The `model.` part of a stage: embedding, layers (by global index), final norm."""

    def __init__(self, model, first_layer: int, num_layers: int, embedding: bool, norm: bool):
        super().__init__()
        if embedding:
            self.embed_tokens = nn.Embedding(model.vocab_size, model.hidden_size)
        self.layers = nn.ModuleDict(
            {str(first_layer + i): DecoderLayer(model) for i in range(num_layers)})
        if norm:
            self.norm = RMSNorm(model.hidden_size, model.norm_epsilon)


class Stage(nn.Module):
    """Layers [first_layer, first_layer + num_layers) of the model; parameter names are Hugging
    Face's global ones (model.layers.7.mlp.up_proj.weight), so a stage loads any checkpoint.
    With tied embeddings the LM head is the embedding's matrix; on a last stage without the
    embedding it is a copy named model.embed_tokens.weight, whose gradient the runtime sums with
    the first stage's."""

    def __init__(self, model, first_layer: int, num_layers: int, has_embedding: bool,
                 has_lm_head: bool):
        super().__init__()
        self.config = model
        self.first_layer, self.num_layers = first_layer, num_layers
        self.has_embedding, self.has_lm_head = has_embedding, has_lm_head
        tied = model.tie_embeddings
        self.model = Decoder(model, first_layer, num_layers,
                             embedding=has_embedding or (has_lm_head and tied), norm=has_lm_head)
        if has_lm_head and not tied:
            self.lm_head = nn.Linear(model.hidden_size, model.vocab_size, bias=False)

    @property
    def tied_copy(self) -> bool:
        """A last stage holding its own copy of the tied embedding (the first stage is elsewhere)."""
        return self.has_lm_head and not self.has_embedding and self.config.tie_embeddings

    def head_weight(self) -> torch.Tensor:
        if self.config.tie_embeddings:
            return self.model.embed_tokens.weight
        return self.lm_head.weight

    def layers(self) -> List[DecoderLayer]:
        return [self.model.layers[str(self.first_layer + i)] for i in range(self.num_layers)]

    def load(self, values: dict) -> None:
        """Copies parameters by name (numpy arrays or tensors, e.g. infinipipe.init_params or a
        checkpoint's); every parameter of the stage must be there."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name not in values:
                    raise KeyError(f"no value for parameter '{name}'")
                v = torch.as_tensor(values[name])
                if tuple(v.shape) != tuple(p.shape):
                    raise ValueError(f"parameter '{name}' has shape {tuple(v.shape)}, the stage "
                                     f"needs {tuple(p.shape)}")
                p.copy_(v.to(p.dtype))


def head_loss(stage: Stage, x: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor,
              scale: float, norm_weight: Optional[torch.Tensor] = None
              ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Final norm, LM head and the loss of rows whose target is >= 0 (-1: nothing predicted),
    in blocks of rows (lm_loss): (scaled loss for backward, unscaled sum of token losses).
    `norm_weight`: the final norm's weight to use (a working copy), else the stage's."""
    norm = stage.model.norm
    h = rms_norm(x, norm.weight if norm_weight is None else norm_weight, norm.eps)
    token_loss = lm_loss(h, weight, targets)
    return token_loss * scale, token_loss.detach()


def stage_from_spec(model, spec) -> Stage:
    """The Stage of an infinipipe.Stage (plan.stages[i])."""
    return Stage(model, spec.first_layer, spec.num_layers, spec.has_embedding, spec.has_lm_head)


def softmax_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
