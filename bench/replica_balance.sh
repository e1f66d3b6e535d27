#!/usr/bin/env bash
# Data-parallel replica balance with and without --outlier-delay: `plan --replica all` on the
# 30B / 1M-token / dp 8 example for iterations 0..N-1 (default 6); prints each iteration's
# "outlier delay:" and "replicas:" lines and the planner's time per replica.
#   bash bench/replica_balance.sh [N]   (INFINIPIPE_BUILD_DIR picks the build, default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${INFINIPIPE_BUILD_DIR:-build}/infinipipe"
n="${1:-6}"
args=(plan --config examples/llama30b-96k.yaml --seq-length 1048576
      --max-position-embeddings 1048576 --num-devices 1024 --devices-per-node 8 --pp 16 --dp 8
      --ulysses-degree 8 --global-batch-size 4096 --distribution github --replica all --out "")
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
for delay in "" "--outlier-delay"; do
  for ((i = 0; i < n; i++)); do
    echo "== iteration $i ${delay:-(no delay)}"
    "$bin" "${args[@]}" --iteration "$i" $delay | grep -E "^(outlier delay|replicas|replica [0-9])"
  done
done
