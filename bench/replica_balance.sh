#!/usr/bin/env bash
# Data-parallel replica balance with and without --outlier-delay: `plan --replica all` on the
# 30B / 512K-token / dp 8 example for iterations 0..N-1 (default 6); prints each iteration's
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
# 512K tokens: at 1M the longest sequences no longer fit the presets' usable 70 GiB at pp 16 (the
# published 30B shape's 52 heads allow Ulysses 4 at most).
args=(plan --config examples/llama30b-96k.yaml --seq-length 524288
      --max-position-embeddings 524288 --num-devices 512 --devices-per-node 8 --pp 16 --dp 8
      --ulysses-degree 4 --global-batch-size 4096 --distribution "$dist" "${seed[@]}"
      --replica all --out "")
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)," \
     "distribution $dist ${3:+seed $3}"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
delays=("" "--outlier-delay")
[[ "${DELAY_ONLY:-0}" == 1 ]] && delays=("--outlier-delay")
for delay in "${delays[@]}"; do
  worst=0
  cpu=0
  for ((i = 0; i < n; i++)); do
    echo "== iteration $i ${delay:-(no delay)}"
    # A failed plan ends the bench with its message (the lines kept below would hide it).
    if ! out=$( { TIMEFORMAT=%U; time "$bin" "${args[@]}" --iteration "$i" $delay \
                  > "$tmp"; } 2>&1 ); then
      echo "$out" >&2
      echo "replica_balance: planning iteration $i ${delay:-(no delay)} failed" >&2
      exit 1
    fi
    grep -E "^(outlier delay|replicas|replica [0-9])" "$tmp"
    ratio=$(grep -oE "slowest/mean [0-9.]+" "$tmp" | cut -d' ' -f2)
    cpu=$(echo "$cpu + $(echo "$out" | tail -1)" | bc)
    worst=$(echo "if ($ratio > $worst) $ratio else $worst" | bc)
  done
  echo "== ${delay:-no delay}: worst slowest/mean $worst over $n batches; user CPU $cpu s for" \
       "$((n * 8)) replica plans"
done
