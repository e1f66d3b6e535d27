#!/usr/bin/env bash
# Multi-host checks on one machine: two simulated hosts (network namespaces joined by a veth
# pair, one CPU each, their own hostnames; scripts/multihost-netns.sh) and MPI jobs spanning
# them over TCP only (no shared memory between the hosts). docs/multi-host.md, "Checking a
# multi-host setup".
#
#   comm   (default) test_comm's MpiTwoRanks test, one rank per host: p2p exchange, gradient
#          all-reduce, and a check that the ranks really are in different network namespaces.
#   train  `infinipipe train` pp 2 x dp 2, two ranks per host, EPP plans that slice and pack,
#          adaptive recompute under a memory budget, --cost-model-update off; it stops with a
#          checkpoint after 2 iterations and a second job resumes it for 2 more. The losses and
#          plans equal those of the same run on one host, uninterrupted, bit for bit.
#
# Usage: scripts/multihost-check.sh [BUILD_DIR] [comm|train]   (default: build comm)
# Needs root, iproute2, util-linux (unshare, taskset) and 2 CPUs; python3 for `train`'s checks.
# Exit:  0 passed, 1 failed, 77 skipped (network namespaces not permitted here).
set -uo pipefail

BUILD=${1:-build}
CHECK=${2:-comm}
HERE=$(dirname "$(readlink -f "$0")")

case $CHECK in
  comm) need=test_comm ;;
  train) need=infinipipe ;;
  *)
    echo "multihost-check: unknown check '$CHECK'; choose comm or train" >&2
    exit 2
    ;;
esac
BIN=$(readlink -f "$BUILD/$need" 2>/dev/null || true)
if [[ -z "$BIN" || ! -x "$BIN" ]]; then
  echo "multihost-check: $BUILD/$need not found; build it first (ninja -C $BUILD $need)" >&2
  exit 1
fi

# shellcheck source=multihost-netns.sh
source "$HERE/multihost-netns.sh"
mh_setup

check_comm() {
  mh_mpirun 120 -np 2 --map-by node \
    env INFINIPIPE_EXPECT_TWO_HOSTS=1 OMP_NUM_THREADS=1 \
    "$BIN" --gtest_color=no --gtest_filter='MpiTwoRanks.*' 2>&1 | tee "$MH_TMP/out"
  local rc=${PIPESTATUS[0]}
  if [[ $rc -eq 0 ]] && grep -q "\[  PASSED  \] 1 test" "$MH_TMP/out"; then
    echo "multihost-check: passed (2 ranks, 2 network namespaces, MPI over TCP)"
    return 0
  fi
  echo "multihost-check: FAILED (mpirun exit code $rc)" >&2
  return 1
}

# A tiny Llama on sequences up to 2048 tokens: under a 14 MiB budget EPP cuts the long ones into
# slices, packs the short ones and tail slices together, and recomputes some layers.
TRAIN_ARGS=(train --num-layers 2 --hidden-size 64 --num-attention-heads 4 --group-query-attention
  --num-query-groups 2 --seq-length 2048 --global-batch-size 8 --device cpu
  --pp 2 --dp 2 --train-iters 4 --recompute-granularity adaptive --memory-budget 14MiB
  --min-tail-slice 256 --cost-model-update off --quiet)

check_train() {
  local corpus=$MH_TMP/corpus t0=$SECONDS
  "$BIN" data synth --output "$corpus" --seq-length 2048 --num-documents 200 >/dev/null || return 1
  # One host: the two CPUs of both simulated hosts, 4 ranks, shared memory between them.
  taskset -c 0,1 timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe --bind-to none \
    -np 4 env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" "${TRAIN_ARGS[@]}" --data-path "$corpus" --log-dir "$MH_TMP/one" \
    --trace "$MH_TMP/one-trace" >"$MH_TMP/one.out" 2>&1 ||
    {
      cat "$MH_TMP/one.out"
      echo "multihost-check: FAILED: the one-host run failed" >&2
      return 1
    }
  # Two hosts: `--map-by node` deals ranks out in turn, so host A runs ranks 0 and 2 (replica
  # 0's pipeline) and host B ranks 1 and 3; each host's two ranks share its one CPU, as on one
  # host four ranks share two, so both runs predict the same times and make the same plans. The
  # first job stops with a checkpoint after iteration 2, the second resumes it.
  local job
  for job in first second; do
    local extra=(--exit-interval 2)
    [[ $job == second ]] && extra=(--load "$MH_TMP/ck")
    mh_mpirun 180 -np 4 --map-by node env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
      "$BIN" "${TRAIN_ARGS[@]}" --data-path "$corpus" --save "$MH_TMP/ck" --log-dir "$MH_TMP/two" \
      --trace "$MH_TMP/two-trace-$job" "${extra[@]}" >"$MH_TMP/two-$job.out" 2>&1 ||
      {
        cat "$MH_TMP/two-$job.out"
        echo "multihost-check: FAILED: the $job two-host job failed" >&2
        return 1
      }
  done
  /usr/bin/python3 "$HERE/multihost_compare.py" "$MH_TMP/one/metrics.jsonl" \
    "$MH_TMP/two/metrics.jsonl" "$MH_TMP/one-trace/plans" "$MH_TMP/two-trace-first/plans" \
    "$MH_TMP/two-trace-second/plans" || {
    echo "multihost-check: FAILED: the two-host run differs from the one-host run" >&2
    return 1
  }
  echo "multihost-check: passed (train pp 2 x dp 2 over 2 hosts, TCP only, saved and resumed:" \
    "losses and plans equal the one-host run bit for bit; $((SECONDS - t0)) s)"
}

"check_$CHECK"
