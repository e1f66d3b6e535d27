#!/usr/bin/env python3
"""Kernel efficiency: model FLOP/s of a training step (and of attention) next to oneDNN's sgemm
rate measured in the same run, on 1 and 2 threads (bench_model). Prints markdown.
QUICK=1 (or --quick): fewer repetitions, 1K-token step, 2K attention."""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402


def main():
    args = sys.argv[1:]
    if os.environ.get("QUICK") == "1" and "--quick" not in args:
        args.append("--quick")
    exe = bc.binary("bench_model")
    cmd = [exe] + args
    print("# Kernel efficiency: training step FLOP/s vs oneDNN sgemm\n")
    print("\n".join(bc.machine_lines()))
    with bc.LoadSampler() as load:
        _, out, _ = bc.run(cmd)
    print(f"- {load.describe()}")
    print(f"- command: `{' '.join(cmd)}`\n")
    print(out.rstrip())


if __name__ == "__main__":
    main()
