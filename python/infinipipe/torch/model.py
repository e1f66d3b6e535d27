"""The Llama model as PyTorch modules with Hugging Face parameter names, split into the stages of
a plan (a contiguous range of layers; the first holds the embedding, the last the final norm and
the LM head). A stage runs *chunks*: packed whole sequences and slices of sequences, each
sequence attending only to itself, a slice also to the K/V of its sequence's earlier slices (its
context). The maths follow the C++ engine (src/model): RMSNorm, rotary embeddings with
Hugging Face's rotate_half, grouped-query attention, SwiGLU, the loss summed over the predicted
tokens and scaled by 1 / (predicted tokens of the global batch).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

import infinipipe as ip
from infinipipe.torch import fused
from infinipipe.torch.lm_loss import lm_loss
from infinipipe.torch.stages import ChunkAttention, load_by_name


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

    def forward(self, x: torch.Tensor, position: Tuple[torch.Tensor, torch.Tensor],
                attention: ChunkAttention) -> torch.Tensor:
        """x (n, hidden) of one chunk (with Ulysses: this rank's share of its tokens), position
        the (cos, sin) of its tokens; `attention` (infinipipe's, stages.ChunkAttention) knows the
        chunk's sequences and contexts."""
        n = x.shape[0]
        cos, sin = position
        a = self.self_attn
        h = self.input_layernorm(x)
        q = rotate(a.q_proj(h).view(n, a.heads, a.head_dim), cos, sin)
        k = rotate(a.k_proj(h).view(n, a.kv_heads, a.head_dim), cos, sin)
        v = a.v_proj(h).view(n, a.kv_heads, a.head_dim)
        attn = attention(q, k, v).reshape(n, a.heads * a.head_dim)
        x = x + a.o_proj(attn)
        return x + self.mlp(self.post_attention_layernorm(x))


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


class _Embedding(nn.Module):
    def __init__(self, embed_tokens: nn.Embedding):
        super().__init__()
        self.embed_tokens = embed_tokens

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.embed_tokens.weight)


class Head(nn.Module):
    """Final norm, output projection (`projection`: the LM head or the tied embedding) and the
    loss in blocks of rows (lm_loss)."""

    def __init__(self, norm: nn.Module, projection: nn.Module):
        super().__init__()
        self.norm, self.projection = norm, projection

    def forward(self, x: torch.Tensor, targets: torch.Tensor, scale: float
                ) -> Tuple[torch.Tensor, torch.Tensor]:
        token_loss = lm_loss(self.norm(x), self.projection.weight, targets)
        return token_loss * scale, token_loss.detach()


class Stage(nn.Module):
    """Layers [first_layer, first_layer + num_layers) of the model, a stages.PipelineStage;
    parameter names are Hugging Face's global ones (model.layers.7.mlp.up_proj.weight), so a
    stage loads any checkpoint. With tied embeddings the LM head is the embedding's matrix; on a
    last stage without the embedding it is a copy named model.embed_tokens.weight, whose
    gradient the runtime sums with the first stage's."""

    def __init__(self, model, first_layer: int, num_layers: int, has_embedding: bool,
                 has_lm_head: bool):
        super().__init__()
        self.config = model
        self.first_layer, self.num_layers = first_layer, num_layers
        self.has_embedding, self.has_lm_head = has_embedding, has_lm_head
        self.hidden_size = model.hidden_size
        tied = model.tie_embeddings
        self.model = Decoder(model, first_layer, num_layers,
                             embedding=has_embedding or (has_lm_head and tied), norm=has_lm_head)
        if has_lm_head and not tied:
            self.lm_head = nn.Linear(model.hidden_size, model.vocab_size, bias=False)
        self._rotary: Optional[Rotary] = None

    @property
    def tied_copy(self) -> bool:
        return self.has_lm_head and not self.has_embedding and self.config.tie_embeddings

    def tied_weight(self) -> Optional[torch.Tensor]:
        if self.config.tie_embeddings and (self.has_embedding or self.tied_copy):
            return self.model.embed_tokens.weight
        return None

    def embedding(self) -> nn.Module:
        return _Embedding(self.model.embed_tokens)

    def layer(self, index: int) -> "DecoderLayer":
        return self.model.layers[str(index)]

    def head(self) -> nn.Module:
        projection = self.model.embed_tokens if self.config.tie_embeddings else self.lm_head
        return Head(self.model.norm, projection)

    def position_embedding(self, positions: torch.Tensor, dtype: torch.dtype
                           ) -> Tuple[torch.Tensor, torch.Tensor]:
        """fp32 cos and sin whatever the hidden states' dtype (fused.rotate computes in fp32)."""
        if self._rotary is None or self._rotary.inv_freq.device != positions.device:
            self._rotary = Rotary(self.config.head_dim, self.config.rotary_base, positions.device)
        return self._rotary.cos_sin(positions)

    def load(self, values: dict) -> None:
        """Copies parameters by name (numpy arrays or tensors, e.g. infinipipe.init_params or a
        checkpoint's); every parameter of the stage must be there."""
        load_by_name(self, values)


def stage_from_spec(model, spec) -> Stage:
    """The Stage of an infinipipe.Stage (plan.stages[i]); ConfigError for a model these modules
    do not compute (the trainer refuses it before, ip.train_problems)."""
    if model.llama_differences:
        raise ip.ConfigError(f"infinipipe.torch's own modules compute the Llama architecture; "
                             f"{model.llama_differences}: use the model's own modelling code "
                             "(--hf-model DIR, infinipipe.torch.wrap)")
    return Stage(model, spec.first_layer, spec.num_layers, spec.has_embedding, spec.has_lm_head)
