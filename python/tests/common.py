"""Shared by the Python tests: the small model, a long-tail batch, the reference, launching."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, List, Optional, Sequence

import numpy as np

import infinipipe as ip

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))

# 8 layers (pp 4 x vpp 2 is one layer a stage), GQA 4/2, vocab 97, sequences up to 256 tokens.
# Plans are made for the A800 preset: its fixed coefficients give the same plans on any machine
# (the cpu preset times this machine), and the executors run them on the CPU all the same.
MODEL = ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--group-query-attention", "--seq-length", "256",
         "--vocab-size", "97", "--device", "a800-80gb", "--min-tail-slice", "16"]
LENGTHS = [256, 40, 17, 200, 5, 96, 2, 130, 64, 31, 150, 77]


def batch(seed: int, lengths: Sequence[int], vocab: int) -> List[List[int]]:
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(0, vocab, n)] for n in lengths]


def reference(cfg: ip.Config, seqs) -> (float, Dict[str, np.ndarray]):
    """The C++ engine on one process, every sequence whole, from the seed's weights."""
    return ip.reference_step(cfg, ip.init_params(cfg), seqs)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def python_env() -> Dict[str, str]:
    env = dict(os.environ)
    import infinipipe
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(infinipipe.__file__)))
    env["OMP_NUM_THREADS"] = "1"
    return env


def mpirun(n: int, args: Sequence[str], timeout: float = 240.0,
           tmpdir: Optional[str] = None) -> subprocess.CompletedProcess:
    """`mpirun -np n python3 ARGS` with this Python and package; output captured. `tmpdir`: the
    job's TMPDIR (where its ranks meet)."""
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np",
           str(n), "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", sys.executable] + list(args)
    env = python_env()
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def binary() -> str:
    """The `infinipipe` command of the build this package came from."""
    import infinipipe
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(infinipipe.__file__))))
    path = os.path.join(build, "infinipipe")
    return path if os.path.exists(path) else shutil.which("infinipipe")


class TempDir:
    def __enter__(self) -> str:
        self.path = tempfile.mkdtemp(prefix="infinipipe-py-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


class CorpusTestCase(unittest.TestCase):
    """A synthetic corpus (`infinipipe data synth`, byte tokens, documents up to 256 tokens) in
    a temporary folder for the class: cls.dir, cls.corpus."""

    NUM_DOCUMENTS = 400

    @classmethod
    def setUpClass(cls):
        cls.tmp = TempDir()
        cls.dir = cls.tmp.__enter__()
        cls.corpus = os.path.join(cls.dir, "corpus")
        subprocess.run([binary(), "data", "synth", "--output", cls.corpus, "--seq-length", "256",
                        "--num-documents", str(cls.NUM_DOCUMENTS)], check=True,
                       capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)
