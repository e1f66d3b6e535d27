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
    bc.report_benchmark("Kernel efficiency: training step FLOP/s vs oneDNN sgemm", "bench_model")


if __name__ == "__main__":
    main()
