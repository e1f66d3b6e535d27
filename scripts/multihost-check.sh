#!/usr/bin/env bash
# Multi-host check on one machine: two network namespaces ("hosts" 10.200.0.1 and 10.200.0.2)
# joined by a veth pair, and a 2-rank MPI job with one rank in each, talking TCP only
# (no shared memory). It runs test_comm's MpiTwoRanks test (p2p exchange + gradient all-reduce,
# and a check that the ranks really are in different network namespaces).
#
# mpirun runs in the first namespace and starts the second rank's orted through a tiny launch
# agent that does `ip netns exec` where a real cluster would use ssh (docs/multi-host.md).
#
# Usage: scripts/multihost-check.sh [BUILD_DIR]    (default: build; needs root and iproute2)
# Exit:  0 passed, 1 failed, 77 skipped (network namespaces not permitted here).
set -uo pipefail

BUILD=${1:-build}
BIN=$(readlink -f "$BUILD/test_comm" 2>/dev/null || true)
if [[ -z "$BIN" || ! -x "$BIN" ]]; then
  echo "multihost-check: $BUILD/test_comm not found; build it first (ninja -C $BUILD test_comm)" >&2
  exit 1
fi

# Names unique per run, so concurrent runs do not collide (interface names: 15 chars max).
id=$$
NS_A=ipp-a-$id NS_B=ipp-b-$id VETH_A=ippa$id VETH_B=ippb$id
TMP=$(mktemp -d)

cleanup() {
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null  # deleting a namespace deletes its end of the veth pair
  rm -rf "$TMP"
}
trap cleanup EXIT

if ! ip netns add "$NS_A" 2>"$TMP/err"; then
  echo "multihost-check: skipped: cannot create network namespaces here ($(cat "$TMP/err"));" \
    "run as root on a machine that permits 'ip netns add', or do the manual check in" \
    "docs/multi-host.md" >&2
  exit 77
fi
set -e
ip netns add "$NS_B"
ip link add "$VETH_A" type veth peer name "$VETH_B"
ip link set "$VETH_A" netns "$NS_A"
ip link set "$VETH_B" netns "$NS_B"
ip -n "$NS_A" addr add 10.200.0.1/24 dev "$VETH_A"
ip -n "$NS_B" addr add 10.200.0.2/24 dev "$VETH_B"
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
done
ip -n "$NS_A" link set "$VETH_A" up
ip -n "$NS_B" link set "$VETH_B" up

# The launch agent mpirun calls instead of ssh: `agent HOST COMMAND...`.
cat >"$TMP/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case \$host in
  10.200.0.2) ns=$NS_B ;;
  *) ns=$NS_A ;;
esac
exec ip netns exec \$ns sh -c "\$*"
AGENT
chmod +x "$TMP/agent"
printf '10.200.0.1 slots=1\n10.200.0.2 slots=1\n' >"$TMP/hosts"

set +e
ip netns exec "$NS_A" timeout -s KILL 120 mpirun --allow-run-as-root --bind-to none \
  --hostfile "$TMP/hosts" -np 2 --map-by node \
  --mca plm_rsh_agent "$TMP/agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca btl tcp,self --mca btl_tcp_if_include 10.200.0.0/24 \
  --mca oob_tcp_if_include 10.200.0.0/24 \
  env INFINIPIPE_EXPECT_TWO_HOSTS=1 OMP_NUM_THREADS=1 \
  "$BIN" --gtest_color=no --gtest_filter='MpiTwoRanks.*' 2>&1 | tee "$TMP/out"
rc=${PIPESTATUS[0]}
if [[ $rc -eq 0 ]] && grep -q "\[  PASSED  \] 1 test" "$TMP/out"; then
  echo "multihost-check: passed (2 ranks, 2 network namespaces, MPI over TCP)"
  exit 0
fi
echo "multihost-check: FAILED (mpirun exit code $rc)" >&2
exit 1
