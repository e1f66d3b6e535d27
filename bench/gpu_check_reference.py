"""The C++ engine's loss and gradients for the GPU check's maths phase, as .npz, so the machine
that runs the check needs no engine (bench/gpu_bundle.sh carries them; bench/gpu_check.py makes
them itself where the module is a full build). Needs the full module (`ip.reference_step`).

    python3 bench/gpu_check_reference.py --out DIR      # writes DIR/small.npz
"""

import argparse
import os
import sys

import numpy as np

import infinipipe as ip

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check_cases import SMALL, SMALL_LENGTHS, maths_cases, small_sequences  # noqa: E402


def write_reference(out: str) -> str:
    """One reference serves every case: parallelism never changes the maths, so each case's plan
    must reproduce the engine's step on the whole batch."""
    cfg = ip.Config.from_args(SMALL)
    params = ip.init_params(cfg)
    for _, words in maths_cases(ip.schedules()):  # every case's configuration starts alike
        other = ip.init_params(ip.Config.from_args(SMALL + words))
        if any(not np.array_equal(other[n], v) for n, v in params.items()):
            raise SystemExit("gpu_check_reference: init_params depends on the layout")
    loss, grads = ip.reference_step(cfg, params, small_sequences())
    arrays = {"lengths": np.array(SMALL_LENGTHS, dtype=np.int64), "loss": np.array(loss)}
    arrays["tokens"] = np.concatenate([np.array(s, dtype=np.int64) for s in small_sequences()])
    arrays.update({f"param/{n}": v for n, v in params.items()})
    arrays.update({f"grad/{n}": g for n, g in grads.items()})
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "small.npz")
    np.savez_compressed(path, **arrays)
    return path


def read_reference(path: str):
    """(params, sequences, loss, grads) of write_reference's file."""
    with np.load(path) as z:
        lengths = [int(n) for n in z["lengths"]]
        tokens = [int(t) for t in z["tokens"]]
        params = {k[6:]: z[k] for k in z.files if k.startswith("param/")}
        grads = {k[5:]: z[k] for k in z.files if k.startswith("grad/")}
        loss = float(z["loss"])
    seqs, at = [], 0
    for n in lengths:
        seqs.append(tokens[at:at + n])
        at += n
    return params, seqs, loss, grads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder of small.npz")
    print("gpu_check_reference:", write_reference(ap.parse_args().out))


if __name__ == "__main__":
    main()
