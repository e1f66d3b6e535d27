"""The PyTorch executor in one process (every rank's action list in turn, over an in-process
link): every schedule's plan, sliced or not, recomputing or not, on one stage and on several,
gives the C++ engine's loss and gradients of the whole sequences (invariant 1)."""

import unittest

import numpy as np
import torch

import infinipipe as ip
from common import LENGTHS, MODEL, batch, reference, relative_error
from infinipipe.torch.executor import run_plan_local
from infinipipe.torch.model import stage_from_spec


def run_local(cfg, plan, seqs):
    params = ip.init_params(cfg)
    stages = {s.index: stage_from_spec(cfg.model, s) for s in plan.stages}
    for s in stages.values():
        s.load({n: params[n] for n, _ in s.named_parameters()})
    predicted = sum(n - 1 for n in plan.seq_lengths)
    stats = run_plan_local(plan, stages, seqs, 1.0 / predicted, torch.device("cpu"))
    grads = {}
    for s in stages.values():  # a tied embedding's two ends add up
        for name, p in s.named_parameters():
            grads[name] = grads.get(name, 0) + p.grad.numpy()
    return sum(x.loss_sum for x in stats) / predicted, grads


class LocalExecutor(unittest.TestCase):
    def check(self, words, schedule="", fixed_layout=False):
        cfg = ip.Config.from_args(MODEL + words + ["--global-batch-size", str(len(LENGTHS))])
        if fixed_layout:  # the stages fixed by cost, as train fixes them
            cfg = cfg.with_stage_layout(ip.CostModel.from_config(cfg))
        seqs = batch(5, LENGTHS, cfg.model.vocab_size)
        plan = ip.plan(LENGTHS, cfg, schedule=schedule).plan
        loss, grads = run_local(cfg, plan, seqs)
        want_loss, want = reference(cfg, seqs)
        self.assertAlmostEqual(loss, want_loss, delta=1e-5 * want_loss)
        self.assertEqual(set(grads), set(want))
        for name, g in want.items():
            self.assertLess(relative_error(grads[name], g), 1e-5, name)
        return plan

    def test_every_schedule_on_two_stages(self):
        for schedule in ip.schedules():
            with self.subTest(schedule=schedule):
                words = ["--pp", "2", "--memory-budget", "8MiB"]
                if schedule == "interleaved":
                    words += ["--vpp", "2"]
                self.check(words, schedule)

    def test_sliced_hybrid_and_recomputed_chunks_on_virtual_stages(self):
        plan = self.check(["--pp", "2", "--vpp", "2", "--memory-budget", "5MiB"],
                          fixed_layout=True)
        self.assertEqual(plan.vpp, 2)
        self.assertTrue({"split", "hybrid"} <= {c.kind for c in plan.chunks})
        self.assertGreater(plan.num_pipelines, 1)
        self.assertGreater(sum(a.recompute_layers for r in plan.actions for a in r), 0)

    def test_untied_embeddings_on_four_stages(self):
        plan = self.check(["--pp", "4", "--memory-budget", "3MiB",
                           "--untie-embeddings-and-output-weights"])
        self.assertIn("split", {c.kind for c in plan.chunks})


if __name__ == "__main__":
    unittest.main()
