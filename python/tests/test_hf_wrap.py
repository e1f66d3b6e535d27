"""`infinipipe.torch.wrap(model, args)` in one process (every pipeline rank and replica of the
plan runs here on the model's own modules) and launched on 4 processes: one global batch's
gradients (float64, with slices, hybrid chunks and recompute at pp 2 x dp 2) equal transformers'
own, and the wrapped model still generates as before (transformers' SDPA outside the executor)."""

import os
import unittest

import numpy as np
import torch

import infinipipe as ip
import infinipipe.torch as ipt
from common import HERE, LENGTHS, TempDir, batch, mpirun, relative_error
from hf_models import make_folder, reference

WORDS = ["--seq-length", "256", "--device", "a800-80gb", "--min-tail-slice", "16", "--pp", "2",
         "--dp", "2", "--memory-budget", "6MiB"]


class Wrap(unittest.TestCase):
    def test_gradients_equal_transformers(self):
        from transformers import AutoModelForCausalLM

        with TempDir() as out:
            folder = make_folder("qwen3", out)
            seqs = batch(3, LENGTHS, 97)
            want_loss, want = reference(folder, seqs)
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64)
            prompt = torch.tensor([seqs[0][:8]])
            before = model.generate(prompt, max_new_tokens=6, do_sample=False)
            epp = ipt.wrap(model, WORDS)
            self.assertEqual(epp.config.model.family, "qwen3")
            loss = epp.forward_backward(seqs)
            kinds = {c.kind for p in epp.last_plans for c in p.chunks}
            self.assertEqual(len(epp.last_plans), 2)  # the two replicas' plans
            self.assertTrue({"split", "hybrid"} <= kinds, kinds)
            self.assertGreater(sum(a.recompute_layers for p in epp.last_plans
                                   for r in p.actions for a in r), 0)
            self.assertLess(abs(loss - want_loss), 1e-9 * want_loss)
            got = {n: p.grad.numpy() for n, p in model.named_parameters()}
            self.assertEqual(set(got), set(want))
            for name, g in want.items():
                self.assertLess(relative_error(got[name], g), 1e-9, name)
            self.assertEqual({id(p) for p in epp.parameters()},
                             {id(p) for p in model.parameters()})
            # Outside the executor the model attends with transformers' SDPA, as before.
            torch.testing.assert_close(
                model.generate(prompt, max_new_tokens=6, do_sample=False), before)

    def test_launched_at_pp2_dp2(self):
        """Under mpirun each process keeps its rank's stages; gradients are summed over the
        replicas and the tied embedding's ends, and the ranks save one checkpoint."""
        with TempDir() as out:
            # A vocabulary the checkpoint's default tokenizer (bytes) fits in.
            folder = make_folder("llama", out, vocab_size=320)
            seqs = batch(3, LENGTHS, 320)
            want_loss, want = reference(folder, seqs)
            r = mpirun(4, [os.path.join(HERE, "dist_wrap.py"), out, folder, "3",
                           ",".join(map(str, LENGTHS))] + WORDS)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            ranks = [np.load(os.path.join(out, f"rank{i}.npz")) for i in range(4)]
            got = {}
            for x in ranks:
                self.assertLess(abs(float(x["loss"]) - want_loss), 1e-9 * want_loss)
                for key in x.files:
                    if key.startswith("grad/"):
                        got[key[5:]] = x[key]
            self.assertEqual(set(got), set(want))
            for name, g in want.items():
                self.assertLess(relative_error(got[name], g), 1e-9, name)
            saved = ip.CheckpointReader(os.path.join(out, "ckpt"))
            self.assertEqual(saved.iteration, 1)
            self.assertEqual(set(saved.param_names()), set(want))

    def test_save_exports_the_model(self):
        from transformers import AutoModelForCausalLM

        with TempDir() as out:
            model = AutoModelForCausalLM.from_pretrained(make_folder("qwen2", out, vocab_size=320))
            epp = ipt.wrap(model, WORDS[:-4] + ["--memory-budget", "64MiB"])
            epp.save(out + "/ckpt", iteration=3)
            ip.export_hf(out + "/ckpt", out + "/hf", "fp32")
            again = dict(AutoModelForCausalLM.from_pretrained(out + "/hf").named_parameters())
            for name, p in model.named_parameters():
                np.testing.assert_array_equal(again[name].detach().numpy(),
                                              p.detach().numpy(), err_msg=name)

    def test_refused(self):
        import transformers

        gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32,
                                                                     n_head=2, vocab_size=50))
        with self.assertRaisesRegex(ip.ConfigError, "model_type"):
            ipt.wrap(gpt2, WORDS)
        with TempDir() as out:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(make_folder("llama", out))
            with self.assertRaisesRegex(ip.ConfigError, "contradict"):
                ipt.wrap(model, WORDS + ["--num-layers", "4"])


if __name__ == "__main__":
    unittest.main()
