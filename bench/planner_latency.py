#!/usr/bin/env python3
"""Planner latency against batch size and pipeline degree (512 ... 8192 sequences x pp 4 ... 32)
with per-phase times (bench_planner_grid). Prints markdown. QUICK=1 (or --quick): a 2 x 2 grid;
--model=7b48k or --model=30b96k: one model only."""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402


def main():
    args = sys.argv[1:]
    if os.environ.get("QUICK") == "1" and "--quick" not in args:
        args.append("--quick")
    exe = bc.binary("bench_planner_grid")
    cmd = [exe] + args
    print("# Planner latency: batch size x pipeline degree\n")
    print("\n".join(bc.machine_lines()))
    with bc.LoadSampler() as load:
        _, out, _ = bc.run(cmd, env={"OMP_NUM_THREADS": "1"})
    print(f"- {load.describe()}")
    print(f"- command: `OMP_NUM_THREADS=1 {' '.join(cmd)}` (one core)\n")
    print(out.rstrip())


if __name__ == "__main__":
    main()
