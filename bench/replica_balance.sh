#!/usr/bin/env bash
# Data-parallel replica balance with and without --outlier-delay: `plan --replica all` on the
# 30B / 1M-token / dp 8 example for iterations 0..N-1 (default 6); prints each iteration's
# "outlier delay:" and "replicas:" lines and the planner's time per replica, then the worst
# slowest/mean of each setting and the CPU seconds of all its plans.
#   bash bench/replica_balance.sh [N] [DISTRIBUTION] [SEED]   (default github, the example's seed)
#   INFINIPIPE_BUILD_DIR picks the build (default build/); DELAY_ONLY=1 skips the runs without
#   the delay; ITERATIONS=N is N when no argument gives it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${INFINIPIPE_BUILD_DIR:-build}/infinipipe"
n="${1:-${ITERATIONS:-6}}"
dist="${2:-github}"
seed=()
[[ -n "${3:-}" ]] && seed=(--seed "$3")
args=(plan --config examples/llama30b-96k.yaml --seq-length 1048576
      --max-position-embeddings 1048576 --num-devices 512 --devices-per-node 8 --pp 16 --dp 8
      --ulysses-degree 4 --global-batch-size 4096 --distribution "$dist" "${seed[@]}"
      --replica all --out "")
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)," \
     "distribution $dist ${3:+seed $3}"
delays=("" "--outlier-delay")
[[ "${DELAY_ONLY:-0}" == 1 ]] && delays=("--outlier-delay")
for delay in "${delays[@]}"; do
  worst=0
  cpu=0
  for ((i = 0; i < n; i++)); do
    echo "== iteration $i ${delay:-(no delay)}"
    out=$( { TIMEFORMAT=%U; time "$bin" "${args[@]}" --iteration "$i" $delay \
             | grep -E "^(outlier delay|replicas|replica [0-9])"; } 2>&1 )
    echo "$out" | sed '$d'
    cpu=$(echo "$cpu + $(echo "$out" | tail -1)" | bc)
    ratio=$(echo "$out" | grep -oE "slowest/mean [0-9.]+" | cut -d' ' -f2)
    worst=$(echo "if ($ratio > $worst) $ratio else $worst" | bc)
  done
  echo "== ${delay:-no delay}: worst slowest/mean $worst over $n batches; user CPU $cpu s for" \
       "$((n * 8)) replica plans"
done
