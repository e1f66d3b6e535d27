"""No hidden synchronisation (issue 39, item 3), checked on the CPU: an action never reads a
value of the device back to the host (a tensor's float() / int() / item(), a boolean row
selection: on CUDA each waits for every kernel queued before it). The executor reads its loss sum
once per rank after the step; its action times come from the clock (CPU) or events (CUDA)."""

import unittest

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import infinipipe as ip
from common import LENGTHS, MODEL, batch, reference
from infinipipe.torch.executor import RankExecutor
from infinipipe.torch.link import LocalLink
from test_executor import run_local

# Ops whose result the host needs before it can go on: each synchronises with a CUDA device.
_READS = {"_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "equal", "unique",
          "_unique2", "item"}


class DeviceReads(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if name in _READS:
            self.ops.append(name)
        elif name == "index" and any(i is not None and i.dtype == torch.bool for i in args[1]):
            self.ops.append("index by mask")  # its row count is read from the device
        return func(*args, **(kwargs or {}))


class NoHiddenSync(unittest.TestCase):
    def test_the_detector_sees_a_read(self):
        with DeviceReads() as reads:
            x = torch.arange(4.0)
            float(x.sum())
            x[x > 1].sum()
        self.assertEqual(reads.ops, ["_local_scalar_dense", "index by mask"])

    def test_actions_read_nothing_and_each_rank_reads_its_loss_once(self):
        cfg = ip.Config.from_args(MODEL + ["--pp", "2", "--vpp", "2", "--memory-budget", "5MiB",
                                           "--global-batch-size", str(len(LENGTHS))])
        seqs = batch(5, LENGTHS, cfg.model.vocab_size)
        plan = ip.plan(LENGTHS, cfg).plan
        self.assertIn("split", {c.kind for c in plan.chunks})
        self.assertGreater(sum(a.recompute_layers for r in plan.actions for a in r), 0)
        with DeviceReads() as reads:
            loss, _ = run_local(cfg, plan, seqs)
        self.assertEqual(reads.ops, ["_local_scalar_dense"] * plan.pp)
        want, _ = reference(cfg, seqs)
        self.assertAlmostEqual(loss, want, delta=1e-5 * want)

    def test_action_times_follow_the_actions(self):
        cfg = ip.Config.from_args(MODEL + ["--global-batch-size", str(len(LENGTHS))])
        seqs = batch(3, LENGTHS, cfg.model.vocab_size)
        plan = ip.plan(LENGTHS, cfg).plan
        from infinipipe.torch.model import stage_from_spec
        stages = {s.index: stage_from_spec(cfg.model, s) for s in plan.stages}
        ex = RankExecutor(plan, 0, stages, LocalLink(), seqs, 1.0, torch.device("cpu"))
        stats = ex.run()
        self.assertEqual([t.index for t in stats.times], list(range(len(plan.actions[0]))))
        end = 0.0
        for t in stats.times:
            self.assertLessEqual(end, t.start)
            self.assertLessEqual(t.start, t.end)
            end = t.end
        self.assertEqual(stats.predicted_tokens, sum(n - 1 for n in LENGTHS))


if __name__ == "__main__":
    unittest.main()
