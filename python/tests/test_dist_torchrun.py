"""`torchrun --nproc_per_node N -m infinipipe.torch.train` trains as `mpirun -np N` does: the
same flags at pp 2 give the same losses, iteration by iteration, under either launcher."""

import json
import os
import subprocess
import sys
import unittest

from common import TempDir, binary, mpirun, python_env

MODEL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--group-query-attention", "--seq-length", "256",
         "--global-batch-size", "8", "--device", "cpu", "--memory-budget", "6MiB",
         "--min-tail-slice", "32", "--lr", "3e-3", "--pp", "2", "--train-iters", "3"]


def losses(metrics_file):
    with open(metrics_file) as f:
        return {r["iteration"]: r["loss"] for r in map(json.loads, f)}


class Torchrun(unittest.TestCase):
    def test_torchrun_trains_as_mpirun_does(self):
        with TempDir() as tmp:
            corpus = os.path.join(tmp, "corpus")
            subprocess.run([binary(), "data", "synth", "--output", corpus, "--seq-length", "256",
                            "--num-documents", "100"], check=True, capture_output=True)
            words = ["-m", "infinipipe.torch.train"] + MODEL + ["--data-path", corpus]
            by_mpirun = os.path.join(tmp, "mpirun.jsonl")
            r = mpirun(2, words + ["--metrics", by_mpirun])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            by_torchrun = os.path.join(tmp, "torchrun.jsonl")
            # --standalone: a rendezvous on this host; nothing of OpenMPI's in the environment.
            env = {k: v for k, v in python_env().items() if not k.startswith(("OMPI_", "PMIX_"))}
            r = subprocess.run(
                [sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc_per_node", "2"] + words + ["--metrics", by_torchrun],
                env=env, capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("pp 2 x dp 1", r.stdout)
            self.assertIn("done: 3 iterations", r.stdout)
            want, got = losses(by_mpirun), losses(by_torchrun)
            self.assertEqual(sorted(got), [1, 2, 3])
            self.assertEqual(got, want)  # the same plans and maths: the same bits
            # Rank 1 writes its own metrics under either launcher.
            self.assertEqual(losses(os.path.join(tmp, "torchrun-rank00001.jsonl")),
                             losses(os.path.join(tmp, "mpirun-rank00001.jsonl")))


if __name__ == "__main__":
    unittest.main()
