"""Hugging Face transformers models through the stage protocol (stages.py), unchanged: their own
modules compute every layer, infinipipe supplies attention through transformers' attention
registry (`AttentionInterface`, registered as "infinipipe").

The model is split into the plan's stages without copying a weight: a stage is a view of the
model's modules under their global names (`model.layers.7.self_attn.q_proj.weight`), so
checkpoints, `save_pretrained` and `generate` see the trained values. Outside infinipipe's
executor the "infinipipe" attention is transformers' "sdpa", so a wrapped model still generates.

Families: LlamaForCausalLM, Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (q/k norm, explicit
head_dim), MistralForCausalLM. What the executor cannot honour exactly is refused before
anything runs (`check_model`): rope scaling, sliding windows shorter than the run's sequences,
dropout, another activation; the folder's config.json also passes infinipipe's one reader of it
(src/ckpt/hf_config.cc), which the planner plans with.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
from torch import nn

import infinipipe as ip
from infinipipe.torch.lm_loss import lm_loss
from infinipipe.torch.stages import ChunkAttention, load_by_name

ATTENTION = "infinipipe"
FAMILIES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
            "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM"}
# transformers passes it through the decoder layer to the attention function.
_KWARG = "infinipipe_attention"


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0,
               scaling: Optional[float] = None, sliding_window: Optional[int] = None, **kwargs):
    """transformers' attention interface: query (1, heads, n, d), key and value (1, kv_heads, n,
    d) after the rotary embedding; returns ((1, n, heads, d), no weights)."""
    attention: Optional[ChunkAttention] = kwargs.pop(_KWARG, None)
    if attention is None:  # generate(), or the user's own forward: transformers' SDPA
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, sliding_window=sliding_window, **kwargs)
    d = query.shape[-1]
    if dropout:
        raise ip.ConfigError(f"attention dropout {dropout}: infinipipe trains without it; set "
                             "attention_dropout 0 or call model.eval()")
    if scaling is not None and not math.isclose(scaling, d ** -0.5, rel_tol=1e-12):
        raise ip.ConfigError(f"attention scaling {scaling}: infinipipe's attention scales by "
                             f"1/sqrt(head_dim) = {d ** -0.5}")
    if query.shape[0] != 1:
        raise ValueError("infinipipe's attention runs one chunk (a batch of 1) at a time")
    out = attention(query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1))
    return out.unsqueeze(0), None


def register() -> None:
    """Registers "infinipipe" in transformers' attention registry (once)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, _attention)


def check_model(model: nn.Module, seq_length: int) -> str:
    """The model's family, or ConfigError naming what the executor cannot honour exactly."""
    cfg = getattr(model, "config", None)
    family = getattr(cfg, "model_type", None)
    if family not in FAMILIES or type(model).__name__ != FAMILIES[family]:
        raise ip.ConfigError(
            f"{type(model).__name__} (model_type {family!r}): infinipipe.torch trains "
            f"{', '.join(FAMILIES.values())}; load the model with AutoModelForCausalLM")
    # transformers 5 keeps rope in rope_parameters (rope_scaling is its alias), 4.x in
    # rope_scaling.
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise ip.ConfigError(f"rope type {kind!r}: infinipipe.torch trains the default rotary "
                             "embedding only (rope scaling is not honoured)")
    window = getattr(cfg, "sliding_window", None)
    types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    if types != {"full_attention"} or getattr(cfg, "use_sliding_window", False):
        raise ip.ConfigError("sliding-window layers: infinipipe.torch trains full attention only "
                             "(use_sliding_window false, layer_types full_attention)")
    if family == "mistral" and window is not None and window < seq_length:
        raise ip.ConfigError(f"sliding_window {window} is shorter than --seq-length "
                             f"{seq_length}: infinipipe.torch does not honour sliding windows; "
                             f"train with --seq-length {window} or less")
    if getattr(cfg, "attention_dropout", 0.0):
        raise ip.ConfigError(f"attention_dropout {cfg.attention_dropout}: infinipipe trains "
                             "without dropout; set it to 0")
    if getattr(cfg, "hidden_act", "silu") != "silu":
        raise ip.ConfigError(f"hidden_act {cfg.hidden_act!r}: infinipipe's models use silu")
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ip.ConfigError("the LM head has a bias: infinipipe's loss uses its weight only")
    return family


class _Embedding(nn.Module):
    def __init__(self, embed_tokens: nn.Module):
        super().__init__()
        self.embed_tokens = embed_tokens

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(tokens)


class _Layer(nn.Module):
    """A transformers decoder layer on a chunk's rows (a batch of one), with infinipipe's
    attention passed through to the attention function."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, position: Tuple[torch.Tensor, torch.Tensor],
                attention: ChunkAttention) -> torch.Tensor:
        out = self.layer(x.unsqueeze(0), attention_mask=None, position_embeddings=position,
                         **{_KWARG: attention})
        if isinstance(out, tuple):  # transformers before 5 returned (hidden, ...)
            out = out[0]
        return out.squeeze(0)


class _Head(nn.Module):
    """The model's final norm and LM head weight, with infinipipe's loss in blocks of rows."""

    def __init__(self, norm: nn.Module, lm_head: nn.Module):
        super().__init__()
        self.norm, self.lm_head = norm, lm_head

    def forward(self, x: torch.Tensor, targets: torch.Tensor, scale: float):
        token_loss = lm_loss(self.norm(x), self.lm_head.weight, targets)
        return token_loss * scale, token_loss.detach()


class HfStage(nn.Module):
    """Layers [first_layer, first_layer + num_layers) of a transformers causal LM, a
    stages.PipelineStage holding the model's own modules (no copy) under their global names."""

    def __init__(self, causal_lm: nn.Module, first_layer: int, num_layers: int,
                 has_embedding: bool, has_lm_head: bool):
        super().__init__()
        inner = causal_lm.model
        self.first_layer, self.num_layers = first_layer, num_layers
        self.has_embedding, self.has_lm_head = has_embedding, has_lm_head
        self.hidden_size = causal_lm.config.hidden_size
        self.tied = causal_lm.lm_head.weight is inner.embed_tokens.weight
        self.model = nn.Module()
        if has_embedding or (has_lm_head and self.tied):
            self.model.embed_tokens = inner.embed_tokens
        self.model.layers = nn.ModuleDict(
            {str(g): inner.layers[g] for g in range(first_layer, first_layer + num_layers)})
        if has_lm_head:
            self.model.norm = inner.norm
            if not self.tied:
                self.lm_head = causal_lm.lm_head
        self.model.rotary_emb = inner.rotary_emb  # buffers only: moves with the stage
        self._layers: Dict[int, _Layer] = {}

    @property
    def tied_copy(self) -> bool:
        return self.has_lm_head and not self.has_embedding and self.tied

    def tied_weight(self) -> Optional[torch.Tensor]:
        if self.tied and (self.has_embedding or self.tied_copy):
            return self.model.embed_tokens.weight
        return None

    def embedding(self) -> nn.Module:
        return _Embedding(self.model.embed_tokens)

    def layer(self, index: int) -> nn.Module:
        if index not in self._layers:
            self._layers[index] = _Layer(self.model.layers[str(index)])
        return self._layers[index]

    def head(self) -> nn.Module:
        return _Head(self.model.norm, self.model.embed_tokens if self.tied else self.lm_head)

    def position_embedding(self, positions: torch.Tensor, dtype: torch.dtype):
        """The model's own rotary embedding of the positions: (cos, sin), each (1, n, head_dim)
        in `dtype`."""
        like = torch.empty(0, dtype=dtype, device=positions.device)
        return self.model.rotary_emb(like, positions.unsqueeze(0))

    def load(self, values: dict) -> None:
        load_by_name(self, values)


class HfModel:
    """A transformers causal LM prepared for infinipipe: checked, its attention set to
    infinipipe's, and split into stages on demand."""

    def __init__(self, causal_lm: nn.Module, seq_length: int):
        self.family = check_model(causal_lm, seq_length)
        register()
        causal_lm.set_attn_implementation(ATTENTION)
        self.causal_lm = causal_lm

    def stage(self, spec) -> HfStage:
        """The stage of a layout entry (an infinipipe.Stage)."""
        return HfStage(self.causal_lm, spec.first_layer, spec.num_layers, spec.has_embedding,
                       spec.has_lm_head)


def load_folder(directory: str, seq_length: int, dtype: torch.dtype = torch.float32) -> HfModel:
    """A folder's model (config.json and safetensors) with its own modelling code."""
    from transformers import AutoModelForCausalLM

    return HfModel(AutoModelForCausalLM.from_pretrained(directory, dtype=dtype), seq_length)
