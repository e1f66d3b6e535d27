"""`torchrun --nproc_per_node N -m infinipipe.torch.train` trains as `mpirun -np N` does: the
same flags at pp 2 give the same losses, iteration by iteration, under either launcher; the
ranks of an mpirun job meet through a file that goes with the job, even a failed one."""

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


# Rank 1 fails once the ranks have met; rank 0 ends without leaving the job cleanly.
FAILED_JOB = """
import os, sys
from infinipipe.torch import distributed
from infinipipe.torch.launch import launch_env
launch = distributed.join("cpu")
print(distributed._store_file(launch), flush=True)
os._exit(1 if launch.rank == 1 else 0)
"""


class MpirunMeeting(unittest.TestCase):
    def test_a_failed_jobs_meeting_file_goes_with_the_job(self):
        # A file left behind would hold the failed job's addresses for the next job given the
        # same id (mpirun's pid again), whose ranks would dial them and be refused.
        with TempDir() as tmp:
            r = mpirun(2, ["-c", FAILED_JOB], timeout=120, tmpdir=tmp)
            self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
            paths = {line for line in r.stdout.splitlines() if "infinipipe-torch-" in line}
            self.assertEqual(len(paths), 1, r.stdout + r.stderr)  # both ranks: one file
            self.assertTrue(next(iter(paths)).startswith(tmp), paths)
            self.assertFalse(os.path.exists(next(iter(paths))), paths)
            left = [os.path.join(d, f) for d, _, files in os.walk(tmp) for f in files]
            self.assertEqual(left, [])


if __name__ == "__main__":
    unittest.main()
