"""Qwen2 and Qwen3 checkpoints in infinipipe's format export to folders that transformers loads with
the same weights; the model properties of each family; the C++ engine refuses what is not Llama
maths. Tiny random models built here (no download)."""

import json
import os
import unittest

import numpy as np
import torch
import transformers

import infinipipe as ip
from common import TempDir

SHAPE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--group-query-attention", "--ffn-hidden-size", "160",
         "--vocab-size", "1000", "--seq-length", "128", "--untie-embeddings-and-output-weights"]
HF_SHAPE = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
                intermediate_size=160, vocab_size=1000, tie_word_embeddings=False)


def hf_model(config: transformers.PretrainedConfig) -> transformers.PreTrainedModel:
    torch.manual_seed(3)
    model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # random norms and biases, so a swapped or missing one shows
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model


class HfFamilies(unittest.TestCase):
    def export_and_load(self, flags, config, family, architecture):
        model = hf_model(config)
        params = {n: p.detach().numpy().astype(np.float32) for n, p in model.named_parameters()}
        cfg = ip.Config.from_args(SHAPE + flags)
        self.assertEqual(cfg.model.family, family)
        self.assertEqual(cfg.model.num_parameters, sum(v.size for v in params.values()))
        with TempDir() as d:
            ckpt, out = os.path.join(d, "ckpt"), os.path.join(d, "hf")
            ip.checkpoint_save_shard(ckpt, 3, 0, 1, params, cfg, with_optimizer=False)
            ip.checkpoint_commit(ckpt, cfg, cfg.to_yaml(), 3, 12)
            self.assertEqual(ip.CheckpointReader(ckpt).model.family, family)
            ip.export_hf(ckpt, out)
            with open(os.path.join(out, "config.json")) as f:
                written = json.load(f)
            self.assertEqual(written["model_type"], family)
            self.assertEqual(written["architectures"], [architecture])
            loaded = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
            self.assertEqual(type(loaded).__name__, architecture)
            got = dict(loaded.named_parameters())
            self.assertEqual(sorted(got), sorted(params))
            for n, v in params.items():
                np.testing.assert_array_equal(got[n].detach().numpy(), v, err_msg=n)
            # The same folder through infinipipe's reader.
            read_cfg, tensors = ip.read_hf(out)
            self.assertEqual(read_cfg.family, family)
            self.assertEqual(sorted(tensors), sorted(params))
            return read_cfg

    def test_qwen2_exports_with_its_qkv_biases(self):
        m = self.export_and_load(["--add-qkv-bias"], transformers.Qwen2Config(**HF_SHAPE),
                                 "qwen2", "Qwen2ForCausalLM")
        self.assertTrue(m.qkv_bias)
        self.assertFalse(m.qk_norm)
        self.assertEqual(m.head_dim, 16)

    def test_qwen3_exports_with_its_qk_norms_and_head_dim(self):
        m = self.export_and_load(["--qk-layernorm", "--kv-channels", "24"],
                                 transformers.Qwen3Config(**HF_SHAPE, head_dim=24),
                                 "qwen3", "Qwen3ForCausalLM")
        self.assertTrue(m.qk_norm)
        self.assertFalse(m.qkv_bias)
        self.assertEqual(m.head_dim, 24)
        self.assertEqual(m.sliding_window, 0)

    def test_the_engine_refuses_what_is_not_llama_maths(self):
        for flags in (["--add-qkv-bias"], ["--qk-layernorm"], ["--kv-channels", "32"]):
            cfg = ip.Config.from_args(SHAPE + flags)
            with self.assertRaisesRegex(ip.ConfigError, "the C\\+\\+ engine trains the Llama "
                                        "architecture; .* --hf-model DIR"):
                ip.init_params(cfg)
        mistral = ip.Config.from_args(SHAPE + ["--model-family", "mistral",
                                               "--sliding-window", "128"])
        self.assertEqual((mistral.model.family, mistral.model.sliding_window), ("mistral", 128))
        self.assertTrue(len(ip.init_params(mistral)) > 0)  # Llama maths: the engine runs it


if __name__ == "__main__":
    unittest.main()
