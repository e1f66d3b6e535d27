#!/usr/bin/env bash
# Real training runs of epp, 1f1b, seq1f1b, gpipe (and interleaved) side by side at one memory
# budget under mpirun; prints a markdown table. Sizes: flags or env vars (see --help).
#   bash bench/schedules_real.sh                  # ~6 minutes on 2 cores
#   INFINIPIPE_BUILD_DIR=build-bench ITERS=8 BUDGET=256MiB bash bench/schedules_real.sh
#   # each schedule planned with the calibration alone and with the online refit, compared:
#   # (15-20 minutes under load)
#   bash bench/schedules_real.sh --cost-model-updates "off online" --schedules "epp 1f1b seq1f1b" \
#       --pp 2 --seq-length 2048 --iters 8 --warmup 3 --rounds 3
set -euo pipefail
exec python3 "$(dirname "$0")/schedules_real.py" "$@"
