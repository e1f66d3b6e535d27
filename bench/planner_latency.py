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
    bc.report_benchmark("Planner latency: batch size x pipeline degree", "bench_planner_grid",
                        env={"OMP_NUM_THREADS": "1"},
                        command_note=" with OMP_NUM_THREADS=1 (one core)")


if __name__ == "__main__":
    main()
