#!/usr/bin/env bash
# The prediction error of the iteration time over a grid: pp 1, 2, 4 x dp 1, 2, a loose and a
# tight budget, EPP and 1F1B, in the C++ engine and infinipipe.torch, each from one fresh
# profile with the online fit; markdown on stdout (bench/prediction_grid.py says what each
# column is).
#   bash bench/prediction_grid.sh [--iters 40] [--pp 1,2,4] [--dp 1,2] [--runtimes cpp,torch]
#   (INFINIPIPE_BUILD_DIR picks the build; ~N min on 2 cores, see docs/benchmarks.md)
set -euo pipefail
exec "$(dirname "$0")/../scripts/python" "$(dirname "$0")/prediction_grid.py" "$@"
