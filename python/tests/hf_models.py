"""Tiny random Hugging Face transformers models of each family infinipipe.torch trains, saved as
folders (built here, no download), and transformers' own single-process loss and gradients."""

import os
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

# The shape of common.MODEL (8 layers, hidden 64, 4 heads over 2 K/V heads, vocab 97), in each
# family's own config class; what differs is what the family adds.
SHAPE = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=8, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=97, max_position_embeddings=256,
             rms_norm_eps=1e-6)
FAMILIES = {
    "llama": ("LlamaConfig", dict(tie_word_embeddings=True)),
    "qwen2": ("Qwen2Config", dict(tie_word_embeddings=False)),  # q/k/v biases
    "qwen3": ("Qwen3Config", dict(head_dim=32, tie_word_embeddings=True)),  # q/k norm
    "mistral": ("MistralConfig", dict(sliding_window=4096, tie_word_embeddings=False)),
}


def make_folder(family: str, directory: str, seed: int = 5, **changes) -> str:
    """A random model of `family` (SHAPE with `changes`) saved with save_pretrained into
    directory/family. Biases and norm weights are random too, so every parameter's gradient path
    is exercised."""
    import transformers

    name, extra = FAMILIES[family]
    config = getattr(transformers, name)(**{**SHAPE, **extra, **changes})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith(".bias") or "norm" in n:
                p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "norm" in n else 0.0))
    path = os.path.join(directory, family)
    model.save_pretrained(path)
    return path


def reference(folder: str, seqs: Sequence[List[int]]) -> Tuple[float, Dict[str, np.ndarray]]:
    """transformers' forward and backward of each sequence on its own, float64: the loss over
    every predicted token of the batch and each parameter's gradient, by name."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64)
    total = sum(len(s) - 1 for s in seqs)
    loss = 0.0
    for s in seqs:
        ids = torch.tensor([s])
        logits = model(input_ids=ids).logits[0]
        # The causal LM loss of `labels=ids`, in float64 (transformers' own loss function
        # computes it in float32).
        part = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:], reduction="sum") / total
        part.backward()
        loss += float(part.detach())
    return loss, {n: p.grad.numpy() for n, p in model.named_parameters()}
