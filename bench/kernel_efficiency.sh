#!/usr/bin/env bash
# Model FLOP/s of a training step vs oneDNN sgemm in the same run (bench_model); prints markdown.
#   bash bench/kernel_efficiency.sh [--quick]   (INFINIPIPE_BUILD_DIR picks the build, default build/)
set -euo pipefail
exec python3 "$(dirname "$0")/kernel_efficiency.py" "$@"
