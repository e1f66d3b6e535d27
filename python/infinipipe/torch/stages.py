"""The stage protocol: what infinipipe.torch's executor needs of a model, and nothing else.

A plan cuts the model into stages, each a contiguous range of decoder layers; the first holds
the embedding, the last the final norm and the loss. The executor (executor.py) runs a stage's
chunks through the modules a stage hands it, and supplies the one piece a model must not do
itself, attention, as a callable (`ChunkAttention`): it knows which rows of a chunk belong to
which sequence and where a slice's earlier tokens (its context) left their K/V.

Two models implement it: infinipipe's own Llama (model.py) and Hugging Face transformers models,
unchanged, through transformers' attention registry (hf.py). A third model implements
`PipelineStage` below; the executor, trainer and checkpoints need nothing else of it.

Shapes: a chunk of n tokens is (n, hidden): no batch dimension, since packed sequences and slices
of one sequence share the rows. Parameter names are the model's global Hugging Face names
(`model.layers.7.mlp.up_proj.weight`), which checkpoints, the optimizer and gradient sums use.
"""

from __future__ import annotations

from typing import Iterator, Optional, Protocol, Tuple, runtime_checkable

import torch
from torch import nn


class ChunkAttention(Protocol):
    """Causal attention of one chunk on one layer, supplied by infinipipe.

    `attention(q, k, v)`: q (n, heads, head_dim), k and v (n, kv_heads, head_dim), after the
    rotary embedding, scaled by 1 / sqrt(head_dim); returns (n, heads, head_dim). Each packed
    sequence attends only to itself, a slice also to its context. The executor keeps the K/V it
    was given for the sequence's later slices. Called once per layer and chunk (again when the
    layer is recomputed)."""

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        ...


@runtime_checkable
class PipelineStage(Protocol):
    """Layers [first_layer, first_layer + num_layers) of a model, as an nn.Module whose
    parameters are those of these layers (and the embedding, final norm and head where it holds
    them).

    The executor calls the modules returned by `embedding()`, `layer(i)` and `head()` through
    ``torch.func.functional_call`` when it runs them on working copies of the weights (bf16),
    so each must compute only from its own parameters and its arguments:

    * ``embedding()(tokens)``: token ids (n,) -> hidden (n, hidden).
    * ``layer(i)(hidden, position, attention)``: global layer i on a chunk; `position` is what
      `position_embedding` returned for the chunk's tokens, `attention` a `ChunkAttention`.
      Returns the hidden states (n, hidden).
    * ``head()(hidden, targets, scale)``: final norm, output projection and the loss of the rows
      whose target is >= 0 (-1: nothing predicted): (loss sum x scale, for backward; the
      unscaled sum, detached).
    """

    first_layer: int
    num_layers: int
    has_embedding: bool
    has_lm_head: bool
    hidden_size: int

    def embedding(self) -> nn.Module:
        ...

    def layer(self, index: int) -> nn.Module:
        ...

    def head(self) -> nn.Module:
        ...

    def position_embedding(self, positions: torch.Tensor, dtype: torch.dtype) -> object:
        """What every layer of the stage needs of the chunk's token positions (n,) (rotary cos
        and sin), made once per chunk; `dtype`: the hidden states'."""
        ...

    @property
    def tied_copy(self) -> bool:
        """A last stage holding its own copy of a tied embedding (the first stage is elsewhere),
        whose gradient the runtime sums with the first stage's."""
        ...

    def tied_weight(self) -> Optional[torch.Tensor]:
        """This stage's end of a tied embedding (first or last stage), else None."""
        ...

    def load(self, values: dict) -> None:
        """Copies parameters by global name; every parameter of the stage must be there."""
        ...

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True
                         ) -> Iterator[Tuple[str, nn.Parameter]]:
        ...


def check_stage(stage: object) -> PipelineStage:
    """The stage, or TypeError naming what of the protocol it lacks."""
    missing = [name for name in ("first_layer", "num_layers", "has_embedding", "has_lm_head",
                                 "hidden_size", "embedding", "layer", "head",
                                 "position_embedding", "tied_copy", "tied_weight", "load",
                                 "named_parameters") if not hasattr(stage, name)]
    if missing:
        raise TypeError(f"{type(stage).__name__} is not an infinipipe.torch.stages."
                        f"PipelineStage: it lacks {', '.join(missing)}")
    return stage  # type: ignore[return-value]


def load_by_name(stage: nn.Module, values: dict) -> None:
    """`PipelineStage.load` for an nn.Module: numpy arrays or tensors by global name."""
    with torch.no_grad():
        for name, p in stage.named_parameters():
            if name not in values:
                raise KeyError(f"no value for parameter '{name}'")
            v = torch.as_tensor(values[name])
            if tuple(v.shape) != tuple(p.shape):
                raise ValueError(f"parameter '{name}' has shape {tuple(v.shape)}, the stage "
                                 f"needs {tuple(p.shape)}")
            p.copy_(v.to(p.dtype))
