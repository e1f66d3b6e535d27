#!/usr/bin/env bash
# How well the cost model predicts real training: pp 2 x dp 2 (4 ranks, the demo's layout) and
# pp 2 x dp 1 (2 ranks), each with --cost-model-update off and online; markdown on stdout.
#   bash bench/prediction_error.sh [--iters 30] [--skip 10] [--dp 2,1] [--bind core,none]
#   (INFINIPIPE_BUILD_DIR picks the build;
#   INFINIPIPE_BASE_BUILD_DIR=DIR runs a base build first, side by side: before / after)
set -euo pipefail
exec python3 "$(dirname "$0")/prediction_error.py" "$@"
