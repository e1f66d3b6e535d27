"""The PyTorch trainer's setup decisions are `infinipipe train`'s (src/setup): `--pp auto` on 2
processes chooses and trains the layout the C++ trainer chooses for the same flags, and
`--rank-placement pipelines` at pp 2 x dp 2 makes the groups in that order (a pipeline's stages
on adjacent ranks) with the losses of Megatron's order, which `--rank-placement auto` keeps on
one host, saying why."""

import json
import os
import re
import subprocess
import unittest

from common import CorpusTestCase, binary, mpirun, python_env
from infinipipe.torch.distributed import group_specs, place_of, rank_of

# test_train.py's tiny model on a synthetic corpus.
MODEL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--group-query-attention", "--seq-length", "256",
         "--global-batch-size", "8", "--device", "cpu", "--memory-budget", "6MiB",
         "--min-tail-slice", "32", "--lr", "3e-3"]
TORCH_TRAIN = ["-m", "infinipipe.torch.train"]


def losses(metrics_file):
    with open(metrics_file) as f:
        return {r["iteration"]: r["loss"] for r in map(json.loads, f)}


def line_starting(text, head):
    found = [line for line in text.splitlines() if line.startswith(head)]
    assert len(found) == 1, (head, text)
    return found[0]


class RankOrders(unittest.TestCase):
    def test_the_pipelines_order_is_the_cpp_one_with_ulysses_ranks_consecutive(self):
        pp, dp, sp = 3, 2, 2
        for rank in range(pp * dp * sp):
            stage, replica, k = place_of(rank, dp, sp, pp, "pipelines")
            # comm/mpi_groups.h's RankLayout: rank = replica x pp + stage (per Ulysses group).
            self.assertEqual(rank // sp, replica * pp + stage)
            self.assertEqual(k, rank % sp)
            self.assertEqual(rank_of(stage, replica, k, dp, sp, pp, "pipelines"), rank)
        pipelines = {s.key: s.ranks for s in group_specs(pp, dp, 1, pp, False, False, "pipelines")
                     if s.role == "pipeline"}
        self.assertEqual(pipelines, {(0, 0): (0, 1, 2), (1, 0): (3, 4, 5)})
        megatron = {s.key: s.ranks for s in group_specs(pp, dp, 1, pp, False, False)
                    if s.role == "pipeline"}
        self.assertEqual(megatron, {(0, 0): (0, 2, 4), (1, 0): (1, 3, 5)})
        sequence = [s.ranks for s in group_specs(pp, dp, sp, pp, False, False, "pipelines")
                    if s.role == "sequence"]
        self.assertTrue(all(r[1] == r[0] + 1 for r in sequence), sequence)


class TorchTrainAuto(CorpusTestCase):
    def words(self, *extra):
        return MODEL + ["--data-path", self.corpus] + list(extra)

    def test_pp_auto_chooses_and_trains_the_layout_infinipipe_train_chooses(self):
        auto = self.words("--pp", "auto", "--train-iters", "2", "--search-iterations", "2")
        cpp = subprocess.run(
            ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2",
             "-x", "OMP_NUM_THREADS", binary(), "train"] + auto,
            env=python_env(), capture_output=True, text=True, timeout=240)
        self.assertEqual(cpp.returncode, 0, cpp.stdout + cpp.stderr)
        py = mpirun(2, TORCH_TRAIN + auto)
        self.assertEqual(py.returncode, 0, py.stdout + py.stderr)
        # "layout search over 2 ranks (...): pp P x vpp V x ulysses 1 x dp D, epp: predicted ..."
        head = "layout search over 2 ranks (what train runs: pp x dp, ulysses 1, schedule epp): "
        chosen = line_starting(cpp.stdout, head)[len(head):].split(":")[0]
        self.assertRegex(chosen, r"^pp \d x vpp \d x ulysses 1 x dp \d, epp$")
        self.assertEqual(line_starting(py.stdout, head)[len(head):].split(":")[0], chosen)
        pp, dp = re.match(r"pp (\d) x vpp \d x ulysses 1 x dp (\d)", chosen).groups()
        for out in (cpp.stdout, py.stdout):
            self.assertIn(f"schedule, pp {pp} x dp {dp}, 2 iterations", out)
            self.assertIn("done: 2 iterations", out)

    def test_pipelines_order_makes_the_groups_in_that_order_with_megatrons_losses(self):
        base = self.words("--pp", "2", "--dp", "2", "--train-iters", "2")
        runs = {}
        for placement in ("auto", "pipelines"):
            metrics = os.path.join(self.dir, f"{placement}.jsonl")
            timings = os.path.join(self.dir, placement, "timings.jsonl")
            r = mpirun(4, TORCH_TRAIN + base + ["--rank-placement", placement, "--metrics",
                                                metrics, "--timings", timings])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            runs[placement] = (r.stdout, losses(metrics))
            # Each rank's timings name the pipeline rank (stage) it ran: rank // dp in
            # Megatron's order, rank % pp with pipelines on adjacent ranks.
            for rank in range(4):
                name = "timings.jsonl" if rank == 0 else f"timings-rank{rank:05d}.jsonl"
                with open(os.path.join(self.dir, placement, name)) as f:
                    records = [json.loads(line) for line in f]
                stage = rank % 2 if placement == "pipelines" else rank // 2
                self.assertEqual({a["rank"] for t in records for a in t["actions"]}, {stage},
                                 (placement, rank))
        # auto on one host: Megatron's order, with the reason and the rule that chose it.
        self.assertIn("rank placement auto: Megatron's order: all 4 ranks run on one host, "
                      "nothing crosses; ranked by the bytes that cross hosts, as no link was "
                      "measured (the PyTorch trainer measures none; `infinipipe train "
                      "--measure-links` ranks the orders by predicted time)", runs["auto"][0])
        self.assertNotIn("rank placement auto", runs["pipelines"][0])  # given, not decided
        megatron, pipelines = runs["auto"][1], runs["pipelines"][1]
        self.assertEqual(sorted(pipelines), [1, 2])
        for it in megatron:
            self.assertAlmostEqual(pipelines[it], megatron[it], delta=1e-6, msg=it)


if __name__ == "__main__":
    unittest.main()
