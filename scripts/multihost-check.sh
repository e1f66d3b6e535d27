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
#   link-down, host-dies
#          the same training across both hosts (6 iterations, a checkpoint every 2,
#          --p2p-timeout 3); once a checkpoint exists, host B's link is set down (link-down) or
#          every rank on host B is killed (host-dies). Host A's ranks must end, the job non-zero:
#          link-down within the timeout + the 2 s question to the silent peers + 5 s, with an
#          error naming the wait, the silent ranks and host B; host-dies within the timeout +
#          3 s, with mpirun naming a dead rank and its host and the survivors saying where they
#          stood. mpirun itself must end within 60 s (after a cut it waits for TCP to give up on
#          host B's daemon: tcp_retries2 is 4 in the namespaces, about 10 s). A relaunch from the
#          last checkpoint must continue with the losses of an uninterrupted run.
#
#   links  the link between the hosts shaped to LINK_RATE (1 Gbit/s) by a token bucket (tc tbf):
#          `train --measure-links` with Megatron's order (stage 0 on host A, stage 1 on host B)
#          measures every pair of hosts; the measured rate between the hosts must be within
#          [0.5, 1.1] x LINK_RATE and the link inside host A at least 3 times faster.
#
#   link-slowed
#          the shaped link (LINK_RATE), pp 2 x dp 1 with stage 0 on host A and stage 1 on host B,
#          `train --measure-links --measure-links-interval 0` (online fit): once SLOW_AFTER (8)
#          iterations ran, the link is reshaped to SLOW_RATE_BITS (default 10 Mbit/s, 100x
#          slower; SLOWED_ITERS iterations in all, default 12). The fit must notice a slow step
#          and the links be measured again: one line for the pair, its new rate within
#          [0.5, 1.1] x SLOW_RATE_BITS; where it does not, the steps' measured and predicted
#          times are printed. Every traced plan's predicted step time must be the
#          replay of its actions with the link it was planned with: the first one measured up to
#          the iteration that noticed, the new one after it (and not the old one; 2 %).
#
#   placement
#          the same shaped link, mpirun's usual order (ranks 0-1 on host A, 2-3 on host B):
#          `train --rank-placement auto --measure-links` measures the links before the groups,
#          ranks both orders by predicted tokens/s with them and must print its reason naming
#          both predictions and the measured link between the hosts, choose pipelines on
#          adjacent ranks for this small model (its activations outweigh its gradients), and
#          train with the losses of Megatron's order (also --measure-links; to 1e-6: the plans
#          differ, as the ranks share the hosts' cores differently); it prints both runs'
#          tokens/s (docs/benchmarks.md). PLACEMENT_ITERS (default 6) iterations each. Then
#          `--pp auto --rank-placement auto --measure-links` (2 iterations) must name the order
#          of the layout the search ranked first, and train it.
#
#   profile
#          the same shaped link: `infinipipe profile --quick` with one rank per host, then two
#          per host dealt out in turn (--map-by node), must write the links between the hosts
#          into its calibration file: two hosts of one (two) slots, the rate between them within
#          [0.5, 1.1] x LINK_RATE, nothing inside a host of one rank (each host's link inside
#          faster than the shaped one), and the job's placement of its ranks where it is not
#          mpirun's filling in order. `simulate --calibration` with the second file must plan on
#          the links (--rank-placement auto).
#
# Usage: scripts/multihost-check.sh [BUILD_DIR]
#          [comm|train|link-down|host-dies|links|link-slowed|placement|profile]
#        (default: build comm)
# Needs root, iproute2 (ip, tc), util-linux (unshare, taskset) and 2 CPUs; python3 for the
# checks that train.
# Exit:  0 passed, 1 failed, 77 skipped (network namespaces not permitted here).
set -uo pipefail

BUILD=${1:-build}
CHECK=${2:-comm}
HERE=$(dirname "$(readlink -f "$0")")

case $CHECK in
  comm) need=test_comm ;;
  train | link-down | host-dies | links | link-slowed | placement) need=infinipipe ;;
  profile) need=infinipipe ;;
  *)
    echo "multihost-check: unknown check '$CHECK'; choose comm, train, link-down, host-dies, links, link-slowed, placement or profile" >&2
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
    env INFINIPIPE_EXPECT_TWO_HOSTS=1 INFINIPIPE_EXPECT_TWO_HOSTNAMES=1 OMP_NUM_THREADS=1 \
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

# The run on one host, uninterrupted: one_host_run ITERS OUT_DIR [ARGS...].
one_host_run() {
  local iters=$1 out=$2
  shift 2
  taskset -c 0,1 timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe --bind-to none \
    -np 4 env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" "${TRAIN_ARGS[@]}" --train-iters "$iters" --log-dir "$out" "$@" >"$out.out" 2>&1 ||
    {
      cat "$out.out"
      echo "multihost-check: FAILED: the one-host run failed" >&2
      return 1
    }
}

secs() { echo "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }

# Cuts host B off (link-down) or kills every process on it (host-dies) once the training job's
# first checkpoint exists, then checks how the job ended and that a relaunch resumes exactly.
P2P_TIMEOUT=3
check_fault() {
  local corpus=$MH_TMP/corpus t0=$SECONDS iters=6
  "$BIN" data synth --output "$corpus" --seq-length 2048 --num-documents 200 >/dev/null || return 1
  one_host_run $iters "$MH_TMP/one" --data-path "$corpus" || return 1
  mh_mpirun 120 -np 4 --map-by node env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" "${TRAIN_ARGS[@]}" --train-iters $iters --data-path "$corpus" --save "$MH_TMP/ck" \
    --save-interval 2 --p2p-timeout $P2P_TIMEOUT >"$MH_TMP/cut.out" 2>&1 &
  local job=$! i
  for i in $(seq 600); do
    [[ -e $MH_TMP/ck/latest ]] && break
    sleep 0.05
  done
  if [[ ! -e $MH_TMP/ck/latest ]]; then
    cat "$MH_TMP/cut.out"
    echo "multihost-check: FAILED: no checkpoint within 30 s" >&2
    return 1
  fi
  local cut_at
  cut_at=$(date +%s%N)
  if [[ $CHECK == link-down ]]; then
    ip -n "$MH_NS_B" link set "$MH_VETH_B" down
  else
    kill -9 $(mh_ranks_of "$MH_NS_B")
  fi
  # The ranks on host A (their error ends them) and mpirun (it also waits to hear from host B's
  # daemon; a cut link leaves that to TCP's retransmission limit, tcp_retries2).
  local ranks_ms=-1 now_ms
  while kill -0 $job 2>/dev/null; do
    now_ms=$((($(date +%s%N) - cut_at) / 1000000))
    if ((ranks_ms < 0)) && [[ -z $(mh_ranks_of "$MH_NS_A") ]]; then ranks_ms=$now_ms; fi
    sleep 0.05
  done
  wait $job
  local rc=$? took_ms
  took_ms=$((($(date +%s%N) - cut_at) / 1000000))
  ((ranks_ms < 0)) && ranks_ms=$took_ms
  cat "$MH_TMP/cut.out"
  echo "multihost-check: host A's ranks ended $(secs $ranks_ms) s and mpirun (exit code $rc)" \
    "$(secs $took_ms) s after host B was cut"
  local latest bad=0
  latest=$(cat "$MH_TMP/ck/latest_checkpointed_iteration.txt")
  expect() { grep -Eq "$1" "$MH_TMP/cut.out" || { echo "multihost-check: no $2" >&2 && bad=1; }; }
  [[ $rc -ne 0 ]] || { echo "multihost-check: the job exited 0 after losing a host" >&2; bad=1; }
  if [[ $CHECK == link-down ]]; then
    # A survivor's deadline passes: it asks the silent peers (2 s) and names them, their host
    # and what it waited for.
    expect "error: rank [02] .* waited [0-9]+ s for .*: ranks? ([0-9]+, )*[13][ ,].*host $MH_HOST_B" \
      "error names the wait, the silent rank and host $MH_HOST_B"
    limit=$((P2P_TIMEOUT + 2 + 5))
  else
    # Host B's daemon reports its dead ranks at once; the survivors say where they stood.
    expect "process rank [13] with PID [0-9]+ on node ($MH_ADDR_B|$MH_HOST_B) exited on signal 9" \
      "message names a dead rank and its host"
    expect "rank [02] .*SIGTERM received (during|after) " "survivor says what it was doing"
    limit=$((P2P_TIMEOUT + 3))
  fi
  if ((ranks_ms > limit * 1000)); then
    echo "multihost-check: host A's ranks took $(secs $ranks_ms) s to end, more than $limit s" >&2
    bad=1
  fi
  if ((took_ms > 60000)); then
    echo "multihost-check: mpirun took $(secs $took_ms) s to end, more than 60 s" >&2
    bad=1
  fi
  # Host B again: its link up, or its processes gone (a relaunch starts new ones).
  mh_pids_kill_b
  ip -n "$MH_NS_B" link set "$MH_VETH_B" up
  mh_mpirun 120 -np 4 --map-by node env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" "${TRAIN_ARGS[@]}" --train-iters $iters --data-path "$corpus" --load "$MH_TMP/ck" \
    --log-dir "$MH_TMP/two" >"$MH_TMP/relaunch.out" 2>&1 ||
    {
      cat "$MH_TMP/relaunch.out"
      echo "multihost-check: FAILED: the relaunch from the checkpoint of iteration $latest failed" >&2
      return 1
    }
  /usr/bin/python3 "$HERE/multihost_compare.py" --resumed "$MH_TMP/one/metrics.jsonl" \
    "$MH_TMP/two/metrics.jsonl" || bad=1
  if ((bad)); then
    echo "multihost-check: FAILED ($CHECK)" >&2
    return 1
  fi
  echo "multihost-check: passed ($CHECK with --p2p-timeout $P2P_TIMEOUT: host A's ranks ended" \
    "$(secs $ranks_ms) s after the cut, mpirun $(secs $took_ms) s; resumed from iteration" \
    "$latest with the uninterrupted losses; $((SECONDS - t0)) s)"
}
LINK_RATE_BITS=1000000000
check_links() {
  local corpus=$MH_TMP/corpus t0=$SECONDS
  "$BIN" data synth --output "$corpus" --seq-length 2048 --num-documents 200 >/dev/null || return 1
  mh_shape ${LINK_RATE_BITS}bit || {
    echo "multihost-check: FAILED: tc tbf could not shape the link" >&2
    return 1
  }
  mh_mpirun 120 -np 4 --map-by slot env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" "${TRAIN_ARGS[@]}" --train-iters 2 --data-path "$corpus" --measure-links \
    --trace "$MH_TMP/trace" --quiet >"$MH_TMP/links.out" 2>&1 || {
    cat "$MH_TMP/links.out"
    echo "multihost-check: FAILED: the training job failed" >&2
    return 1
  }
  cat "$MH_TMP/links.out"
  /usr/bin/python3 - "$MH_TMP/links.out" $LINK_RATE_BITS $MH_HOST_A $MH_HOST_B <<'PY' || return 1
import re, sys
text, rate, a, b = open(sys.argv[1]).read(), int(sys.argv[2]) / 8, sys.argv[3], sys.argv[4]
links = {(m[1], m[2]): (float(m[3]) * 1e6, float(m[4]) * 1e-6)
         for m in re.finditer(r"link (\S+) <-> (\S+): ([0-9.]+) MB/s, ([0-9.]+) us", text)}
cross, inside = links.get((a, b)), links.get((a, a))
bad = []
if cross is None or inside is None:
    bad.append(f"the links {a} <-> {b} and {a} <-> {a} were not both measured: {links}")
else:
    if not 0.5 * rate <= cross[0] <= 1.1 * rate:
        bad.append(f"{a} <-> {b}: {cross[0] / 1e6:.0f} MB/s measured, the link is shaped to "
                   f"{rate / 1e6:.0f} MB/s")
    if inside[0] < 3 * cross[0]:
        bad.append(f"{a} <-> {a} ({inside[0] / 1e6:.0f} MB/s) is not clearly faster than the "
                   f"shaped link ({cross[0] / 1e6:.0f} MB/s)")
for line in bad:
    print("multihost-check: " + line, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  echo "multihost-check: passed (links: the shaped link measured as it is; $((SECONDS - t0)) s)"
}

SLOW_RATE_BITS=${SLOW_RATE_BITS:-10000000}
SLOW_AFTER=8
check_link-slowed() {
  local corpus=$MH_TMP/corpus t0=$SECONDS iters=${SLOWED_ITERS:-12} args=() x
  for x in "${TRAIN_ARGS[@]}"; do [[ $x != --quiet ]] && args+=("$x"); done
  "$BIN" data synth --output "$corpus" --seq-length 2048 --num-documents 400 >/dev/null || return 1
  mh_shape ${LINK_RATE_BITS}bit || {
    echo "multihost-check: FAILED: tc tbf could not shape the link" >&2
    return 1
  }
  # One rank per host (--map-by node), each pipeline hop across the link.
  mh_mpirun 300 -np 2 --map-by node env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" "${args[@]}" --pp 2 --dp 1 --train-iters $iters --data-path "$corpus" \
    --cost-model-update online --measure-links --measure-links-interval 0 \
    --log-dir "$MH_TMP/log" --trace "$MH_TMP/trace" >"$MH_TMP/slowed.out" 2>&1 &
  local job=$! slowed= n
  while kill -0 $job 2>/dev/null; do
    n=$(cat "$MH_TMP/log/metrics.jsonl" 2>/dev/null | grep -c '"iteration"')
    if [[ -z $slowed ]] && ((n >= SLOW_AFTER)); then
      mh_shape ${SLOW_RATE_BITS}bit || return 1
      slowed=1
      echo "multihost-check: link reshaped to $((SLOW_RATE_BITS / 1000000)) Mbit/s after iteration $n"
    fi
    sleep 0.1
  done
  wait $job || {
    cat "$MH_TMP/slowed.out"
    echo "multihost-check: FAILED: the training job failed" >&2
    return 1
  }
  grep -v '^\[' "$MH_TMP/slowed.out" | grep -v '^ iter '
  [[ -n $slowed ]] || {
    echo "multihost-check: FAILED: the run ended before the link was reshaped" >&2
    return 1
  }
  /usr/bin/python3 - "$MH_TMP/slowed.out" "$MH_TMP/trace/plans" $SLOW_RATE_BITS $MH_HOST_A \
    $MH_HOST_B "$MH_TMP/log/metrics.jsonl" <<'PY' || return 1
import glob, json, math, re, sys
out, plans, rate, a, b, metrics = sys.argv[1], sys.argv[2], int(sys.argv[3]) / 8, *sys.argv[4:]
text = open(out).read()
num = r"([0-9.]+) (k|M|G)?B/s, ([0-9.]+) us"
unit = {"k": 1e3, "M": 1e6, "G": 1e9}
def link(m, at):
    return (float(m[at]) * unit.get(m[at + 1], 1), float(m[at + 2]) * 1e-6)
bad = []
first = re.search(rf"^link {a} <-> {b}: ([0-9.]+) MB/s, ([0-9.]+) us$", text, re.M)
changes = [(int(m[7]), link(m, 1), link(m, 4)) for m in re.finditer(
    rf"^link {a} <-> {b}: {num} -> {num} \(iteration ([0-9]+): step .* measured, .* predicted",
    text, re.M)]
slow = [c for c in changes if 0.5 * rate <= c[2][0] <= 1.1 * rate]
if first is None:
    bad.append(f"no first measurement of {a} <-> {b}")
if not slow:
    bad.append(f"no change of {a} <-> {b} to {rate / 1e6:.2f} MB/s noticed by the fit: {changes}")
    # What the fit saw: each step measured against its prediction (rank 0's replica).
    for line in open(metrics):
        m = json.loads(line)
        if "iteration" in m:
            bad.append(f"iteration {m['iteration']}: step {m['measured_step_seconds']:.3f} s "
                       f"measured, {m['predicted_step_seconds']:.3f} s predicted")
if bad:
    print("\n".join("multihost-check: " + x for x in bad), file=sys.stderr)
    sys.exit(1)
# Each plan replayed with a link (its actions' predicted times, step terms, transfers; the plan
# validator's replay when no ranks share cores), against the step time it predicted.
def replay(p, bw, lat):
    ns, m = len(p["stages"]), len(p["chunks"])
    tokens = [sum(s[2] for s in c["slices"]) for c in p["chunks"]]
    xfer = lambda c: 0.0 if tokens[c] == 0 else math.ceil(256.0 * tokens[c]) / bw + lat
    fdone, bdone = {}, {}
    clock, nxt = [0.0] * p["pp"], [0] * p["pp"]
    gap = [t[0] for t in p["rank_step_terms"]]
    tail = [t[1] for t in p["rank_step_terms"]]
    progress = True
    while progress:
        progress = False
        for k, acts in enumerate(p["actions"]):
            while nxt[k] < len(acts):
                kind, c, s, _, dur = acts[nxt[k]]
                if kind == "F":
                    ready = 0.0 if s == 0 else (fdone[(s - 1, c)] + xfer(c) if (s - 1, c) in fdone else None)
                elif (s, c) not in fdone:
                    ready = None
                else:
                    ready = 0.0 if s + 1 >= ns else (bdone[(s + 1, c)] + xfer(c) if (s + 1, c) in bdone else None)
                if ready is None:
                    break
                start = max(clock[k], ready) + gap[k]
                clock[k] = start + dur
                (fdone if kind == "F" else bdone)[(s, c)] = clock[k]
                nxt[k] += 1
                progress = True
    return max(clock[k] + tail[k] for k in range(p["pp"]))
# The link each plan was made with: the first measurement, then each change after its iteration.
used = [(0, (float(first[1]) * 1e6, float(first[2]) * 1e-6))] + [(c[0], c[2]) for c in changes]
noticed = slow[0][0]
before_slow = [l for i, l in used if i < noticed][-1]
rows = []
for path in sorted(glob.glob(plans + "/iter-*-replica0.json")):
    it = int(re.search(r"iter-([0-9]+)", path)[1])
    p = json.load(open(path))
    if "rank_step_terms" not in p:  # planned before the first refit: the prior's step costs
        continue
    pred = p["predicted_step_time"]
    want = replay(p, *[l for i, l in used if i < it][-1])
    other = replay(p, *before_slow)
    rows.append(f"iteration {it}: predicted {pred:.3f} s; replayed with the link it was planned "
                f"with {want:.3f} s, with the link before the slowing {other:.3f} s")
    if abs(want - pred) > 0.02 * pred:
        bad.append(f"iteration {it}: the plan's predicted step {pred:.3f} s is not the replay "
                   f"with the link it should have been planned with ({want:.3f} s)")
    elif it > noticed and abs(other - pred) <= 0.02 * pred:
        bad.append(f"iteration {it}: the link before and after the slowing predict the same "
                   f"step; the check cannot tell which one the plan used")
print("\n".join(rows))
after = [r for r in rows if int(re.search(r"iteration ([0-9]+)", r)[1]) > noticed]
if not after:
    bad.append(f"no plan after iteration {noticed}, where the change was noticed")
print(f"link {a} <-> {b}: {used[0][1][0] / 1e6:.0f} MB/s at start, {slow[0][2][0] / 1e6:.2f} "
      f"MB/s noticed at iteration {noticed} (shaped to {rate / 1e6:.2f} MB/s)")
print("\n".join("multihost-check: " + x for x in bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  echo "multihost-check: passed (link-slowed: the fit noticed the slowed link, the links were" \
    "measured again and the next plans timed its hops by it; $((SECONDS - t0)) s)"
}

check_placement() {
  local corpus=$MH_TMP/corpus t0=$SECONDS pl iters=${PLACEMENT_ITERS:-6} args=() x
  for x in "${TRAIN_ARGS[@]}"; do [[ $x != --quiet ]] && args+=("$x"); done  # the reason prints
  "$BIN" data synth --output "$corpus" --seq-length 2048 --num-documents 400 >/dev/null || return 1
  mh_shape ${LINK_RATE_BITS}bit || return 1
  for pl in auto megatron; do
    mh_mpirun 300 -np 4 --map-by slot env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
      "$BIN" "${args[@]}" --train-iters "$iters" --data-path "$corpus" \
      --rank-placement $pl --measure-links --log-dir "$MH_TMP/$pl" >"$MH_TMP/$pl.out" 2>&1 || {
      cat "$MH_TMP/$pl.out"
      echo "multihost-check: FAILED: the run with --rank-placement $pl failed" >&2
      return 1
    }
  done
  grep -E "^link |rank placement" "$MH_TMP/auto.out"
  # The reason names the chosen order, both orders' predicted tokens/s and the link measured
  # between the hosts (as the run's "link" line printed it).
  local link
  link=$(grep -oE "^link $MH_HOST_A <-> $MH_HOST_B: [0-9.]+ MB/s, [0-9]+ us" "$MH_TMP/auto.out" |
    head -1)
  link=${link#link }
  [[ -n $link ]] || {
    echo "multihost-check: FAILED: no link measured between $MH_HOST_A and $MH_HOST_B" >&2
    return 1
  }
  # One measurement, before the groups, serves the choice and the plans: measured once.
  [[ $(grep -c "^link $MH_HOST_A <-> $MH_HOST_B" "$MH_TMP/auto.out") -eq 1 ]] || {
    echo "multihost-check: FAILED: the links were measured more than once" >&2
    return 1
  }
  grep -qE "rank placement auto: pipelines on adjacent ranks \(rank = replica x pp \+ stage\) for pp 2 x vpp 1 x ulysses 1 x dp 2, epp: predicted [0-9]+ tokens/s, against [0-9]+ tokens/s in Megatron's order; ranked by predicted time with the measured links \($link\)" \
    "$MH_TMP/auto.out" || {
    echo "multihost-check: FAILED: auto did not choose pipelines on adjacent ranks by" \
      "predicted time, naming both predictions and the measured link ($link)" >&2
    return 1
  }
  # --pp auto (dp searched along) with measured links: the layout search ranks every layout in
  # both orders, names the order of the one it ranked first, and the run trains it.
  local search=() skip=
  for x in "${args[@]}"; do
    if [[ -n $skip ]]; then
      [[ $skip == pp ]] && search+=(auto)
      skip=
      continue
    fi
    case $x in
      --pp) search+=(--pp) skip=pp ;;
      --dp) skip=dp ;;
      *) search+=("$x") ;;
    esac
  done
  mh_mpirun 300 -np 4 --map-by slot env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" "${search[@]}" --train-iters 2 --data-path "$corpus" --rank-placement auto \
    --measure-links --log-dir "$MH_TMP/search" >"$MH_TMP/search.out" 2>&1 || {
    cat "$MH_TMP/search.out"
    echo "multihost-check: FAILED: the run with --pp auto --rank-placement auto failed" >&2
    return 1
  }
  grep -E "layout search over|rank placement" "$MH_TMP/search.out"
  if ! grep -qE "layout search over 4 ranks .*: pp [0-9]+ x vpp [0-9-]+ x ulysses 1 x dp [0-9]+, epp, (pipelines on adjacent ranks|Megatron's order): predicted" \
    "$MH_TMP/search.out" || ! grep -q "^done: 2 iterations" "$MH_TMP/search.out"; then
    cat "$MH_TMP/search.out"
    echo "multihost-check: FAILED: --pp auto did not name the order of the layout it chose" \
      "and train it" >&2
    return 1
  fi
  # The two orders make different plans here (their ranks share the hosts' cores differently),
  # so the losses agree to rounding, not bit for bit (on one host they are bit-identical).
  /usr/bin/python3 - "$MH_TMP/megatron/metrics.jsonl" "$MH_TMP/auto/metrics.jsonl" <<'PY' || return 1
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if '"iteration"' in l] for p in sys.argv[1:3])
bad = len(a) != len(b) or any(abs(x - y) > 1e-6 * abs(x) for x, y in zip(a, b))
print(f"losses, Megatron's order: {a}\nlosses, auto: {b}")
sys.exit(1 if bad else 0)
PY
  for pl in auto megatron; do
    /usr/bin/python3 - "$MH_TMP/$pl/metrics.jsonl" $pl <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"iteration"' in l][1:]  # after the first
tok, sec = sum(r["tokens"] for r in recs), sum(r["seconds"] for r in recs)
print(f"placement {sys.argv[2]}: {tok / sec:.0f} tokens/s over iterations 2-{len(recs) + 1}")
PY
  done
  echo "multihost-check: passed (placement: auto chose pipelines inside hosts by predicted" \
    "time with the measured link, same losses; $((SECONDS - t0)) s)"
}

PROFILE_MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --group-query-attention
  --num-query-groups 2 --seq-length 2048 --device cpu)
# profile_job RANKS OUT: `profile --quick` over both hosts, the ranks dealt out in turn.
profile_job() {
  mh_mpirun 300 -np "$1" --map-by node env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    "$BIN" profile --quick "${PROFILE_MODEL[@]}" --out "$2" >"$2.out" 2>&1 || {
    cat "$2.out"
    echo "multihost-check: FAILED: the profile job of $1 ranks failed" >&2
    return 1
  }
  echo "multihost-check: profile over $1 ranks:"
  grep -E "^links|^  link |^  ring|^  p2p fit|^wrote" "$2.out"
}

# check_profile_table FILE SLOTS HOST_OF_RANK: the host links FILE holds (HOST_OF_RANK: JSON).
check_profile_table() {
  /usr/bin/python3 - "$1" "$2" "$3" $LINK_RATE_BITS $MH_HOST_A $MH_HOST_B <<'PY'
import json, sys
cal, slots, placement = json.load(open(sys.argv[1])), int(sys.argv[2]), json.loads(sys.argv[3])
rate, a, b = int(sys.argv[4]) / 8, sys.argv[5], sys.argv[6]
t = cal.get("host_links")
bad = []
if t is None:
    bad.append("the calibration file has no host_links section")
else:
    hosts = [(h["name"], h["slots"]) for h in t["hosts"]]
    links = {tuple(l["between"]): l for l in t["links"]}
    if hosts != [(a, slots), (b, slots)]:
        bad.append(f"hosts {hosts}, want [({a}, {slots}), ({b}, {slots})]")
    if t.get("host_of_rank") != placement:
        bad.append(f"host_of_rank {t.get('host_of_rank')}, want {placement}")
    cross = links.get((a, b), {}).get("bandwidth", 0)
    if not 0.5 * rate <= cross <= 1.1 * rate:
        bad.append(f"{a} <-> {b}: {cross / 1e6:.0f} MB/s written, the link is shaped to "
                   f"{rate / 1e6:.0f} MB/s")
    for h in (a, b):
        inside = links.get((h, h), {}).get("bandwidth", 0)
        # One rank on a host: nothing to measure inside it (0); two: faster than the link.
        if (slots == 1 and inside != 0) or (slots > 1 and inside <= cross):
            bad.append(f"inside {h}: {inside / 1e6:.0f} MB/s written, with {slots} rank(s) there")
for line in bad:
    print("multihost-check: " + line, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

check_profile() {
  local t0=$SECONDS one=$MH_TMP/one-per-host.json two=$MH_TMP/two-per-host.json
  mh_shape ${LINK_RATE_BITS}bit || {
    echo "multihost-check: FAILED: tc tbf could not shape the link" >&2
    return 1
  }
  # One rank per host: the ranks fill the hosts in order, so no placement is written.
  profile_job 2 "$one" && check_profile_table "$one" 1 null || return 1
  # Two per host, dealt out in turn: ranks 0 and 2 on host A, the job's placement kept.
  profile_job 4 "$two" && check_profile_table "$two" 2 "[0, 1, 0, 1]" || return 1
  # plan and simulate price each replica's pipeline by the written links.
  "$BIN" simulate "${PROFILE_MODEL[@]}" --calibration "$two" --pp 2 --dp 2 --global-batch-size 8 \
    --distribution fixed --rank-placement auto >"$MH_TMP/simulate.out" 2>&1 || {
    cat "$MH_TMP/simulate.out"
    echo "multihost-check: FAILED: simulate with the written calibration failed" >&2
    return 1
  }
  grep -E "^rank placement auto: |^links " "$MH_TMP/simulate.out" || {
    cat "$MH_TMP/simulate.out"
    echo "multihost-check: FAILED: simulate did not plan on the measured links" >&2
    return 1
  }
  echo "multihost-check: passed (profile: the links between the hosts written as measured," \
    "one and two ranks per host; $((SECONDS - t0)) s)"
}

check_link-down() { check_fault; }
check_host-dies() { check_fault; }

"check_$CHECK"
