#!/usr/bin/env python3
"""Planner latency against batch size and pipeline degree (512 ... 8192 sequences x pp 4 ... 32)
and on a 1024-GPU cluster (every replica, sequences up to 1M tokens), with per-phase times, CPU
time and peak RSS (bench_planner_grid); then, with INFINIPIPE_BASE_BIN set to a base build's
infinipipe, the side-by-side comparison of bench/planner_scale.py. Prints markdown.
QUICK=1 (or --quick): a 2 x 2 grid only; --model=7b48k or --model=30b96k: one model only;
GRID_THREADS (default 1): the planner threads of the grid."""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import planner_scale  # noqa: E402


def main():
    args = sys.argv[1:]
    quick = os.environ.get("QUICK") == "1" or "--quick" in args
    if quick and "--quick" not in args:
        args.append("--quick")
    threads = bc.env_int("GRID_THREADS", 1)
    exe = bc.binary("bench_planner_grid")
    env = {"OMP_NUM_THREADS": "1"}
    print("# Planner latency: batch size x pipeline degree, and a 1024-GPU cluster\n")
    print("\n".join(bc.machine_lines()))
    runs = [[exe] + args + [f"--threads={threads}"]]
    if not quick:
        runs.append([exe, "--cluster", f"--threads={threads}"])
    outs = []
    with bc.LoadSampler() as load:
        for cmd in runs:
            outs.append(bc.run(cmd, env=env)[1])
    print(f"- {load.describe()}")
    for cmd in runs:
        print(f"- command: `OMP_NUM_THREADS=1 {' '.join(cmd)}`")
    for out in outs:
        print(out.rstrip())
    if not quick and os.environ.get("INFINIPIPE_BASE_BIN"):
        print()
        planner_scale.main()


if __name__ == "__main__":
    main()
