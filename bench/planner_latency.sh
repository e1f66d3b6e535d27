#!/usr/bin/env bash
# EPP planner latency over 512..8192 sequences x pp 4..32, per phase (bench_planner_grid); markdown.
#   bash bench/planner_latency.sh [--quick]   (INFINIPIPE_BUILD_DIR picks the build, default build/)
set -euo pipefail
exec python3 "$(dirname "$0")/planner_latency.py" "$@"
