"""A Hugging Face transformers model trained with infinipipe's EPP plans, then saved, exported
and generated from with transformers.

    scripts/python examples/transformers_epp.py [MODEL_DIR]

MODEL_DIR: a Llama, Qwen2, Qwen3 or Mistral folder; without one a tiny random Qwen3 is built
(no download). One process on the CPU runs the plan's two pipeline stages in turn (under
torchrun each process would keep its own stage: docs/python.md).
"""

import os
import sys
import tempfile

import torch
import transformers

import infinipipe as ip
import infinipipe.torch as ipt


def load_model() -> torch.nn.Module:
    if len(sys.argv) > 1:
        return transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
    torch.manual_seed(0)
    config = transformers.Qwen3Config(
        hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, vocab_size=320, max_position_embeddings=1024)
    return transformers.AutoModelForCausalLM.from_config(config)


def batch(step: int, vocab: int):
    """A long-tail global batch: one long document, several short ones (token ids)."""
    text = "abcdefghijklmnopqrstuvwxyz "  # learnable in a few steps
    ids = [b % vocab for b in text.encode()]
    lengths = [1000, 300, 120, 60, 30, 12][: 6 - step % 2]
    return [(ids * (n // len(ids) + 1))[:n] for n in lengths]


def main() -> None:
    model = load_model()
    # infinipipe train's configuration words; the model's config.json is the model.
    epp = ipt.wrap(model, ["--pp", "2", "--seq-length", "1000", "--device", "cpu",
                           "--memory-budget", "12MiB", "--min-tail-slice", "128"])
    optimizer = torch.optim.AdamW(epp.parameters(), lr=3e-3)
    for step in range(12):
        loss = epp.forward_backward(batch(step, model.config.vocab_size))
        torch.nn.utils.clip_grad_norm_(epp.parameters(), 1.0)  # one process holds them all
        optimizer.step()
        optimizer.zero_grad()
        kinds = sorted({c.kind for p in epp.last_plans for c in p.chunks})
        print(f"step {step}: loss {loss:.4f}, chunks {', '.join(kinds)}")
    work = tempfile.mkdtemp(prefix="transformers-epp-")
    epp.save(os.path.join(work, "checkpoint"), iteration=12)  # infinipipe's checkpoint
    ip.export_hf(os.path.join(work, "checkpoint"), os.path.join(work, "hf"), "fp32")
    trained = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(work, "hf"))
    prompt = torch.tensor([[b % model.config.vocab_size for b in b"the alphabet: abcdef"]])
    out = trained.generate(prompt, max_new_tokens=24, do_sample=False)
    print("generated:", bytes(t for t in out[0].tolist() if t < 256).decode(errors="replace"))
    print(f"checkpoint and Hugging Face folder in {work}")


if __name__ == "__main__":
    main()
