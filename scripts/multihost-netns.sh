# Two simulated hosts on one machine, for the multi-host checks (sourced by
# scripts/multihost-check.sh; docs/multi-host.md). Each "host" is a network namespace with its
# own UTS namespace (so its own hostname), its own CPU (host A runs on CPU 0, host B on CPU 1,
# as two one-core machines would) and an address on a veth pair: 10.200.0.1 and 10.200.0.2.
# mpirun runs on host A and starts host B's daemon through a launch agent that does
# `ip netns exec` where a real cluster would use ssh.
#
# TCP gives up on an unanswered connection after 4 retransmissions (net.ipv4.tcp_retries2, per
# namespace; Linux's default 15 is about 15 minutes), so mpirun learns of a cut-off host's
# daemon in seconds.
#
# After mh_setup: MH_TMP (a scratch folder, kept when MH_KEEP is set), MH_NS_A/B, MH_VETH_A/B,
# MH_HOST_A/B (hostnames), mh_mpirun, mh_ranks_of, mh_host_b_pids, mh_pids_kill_b, mh_shape.

MH_ADDR_A=10.200.0.1
MH_ADDR_B=10.200.0.2
MH_SUBNET=10.200.0.0/24

# Names unique per run, so concurrent runs do not collide (interface names: 15 chars max).
mh_id=$$
MH_NS_A=ipp-a-$mh_id MH_NS_B=ipp-b-$mh_id MH_VETH_A=ippa$mh_id MH_VETH_B=ippb$mh_id
MH_HOST_A=ipp-host-a MH_HOST_B=ipp-host-b
MH_TMP=$(mktemp -d)

# Host B's processes (its daemon and ranks), which outlive a deleted namespace otherwise.
mh_host_b_pids() {
  ip netns pids "$MH_NS_B" 2>/dev/null
}

# The infinipipe processes in a namespace.
mh_ranks_of() {
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do
    [[ $(cat /proc/$p/comm 2>/dev/null) == infinipipe ]] && echo "$p"
  done
}

# Kills host B's processes and waits (up to 5 s) until they are gone.
mh_pids_kill_b() {
  local p i
  for p in $(mh_host_b_pids); do kill -9 "$p" 2>/dev/null; done
  for i in $(seq 50); do
    [[ -z $(mh_host_b_pids) ]] && return 0
    sleep 0.1
  done
}

mh_cleanup() {
  local p
  for ns in "$MH_NS_A" "$MH_NS_B"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  ip netns del "$MH_NS_A" 2>/dev/null
  ip netns del "$MH_NS_B" 2>/dev/null # deleting a namespace deletes its end of the veth pair
  [[ -n ${MH_KEEP:-} ]] && echo "multihost-check: kept $MH_TMP" >&2 || rm -rf "$MH_TMP"
}

# Exits 77 (skipped) where namespaces are not permitted, 1 on any other setup failure.
mh_setup() {
  trap mh_cleanup EXIT
  local tool
  for tool in ip tc unshare taskset; do
    if ! command -v $tool >/dev/null; then
      echo "multihost-check: '$tool' is missing; install iproute2 and util-linux" \
        "(scripts/install-deps.sh)" >&2
      exit 1
    fi
  done
  if ! ip netns add "$MH_NS_A" 2>"$MH_TMP/err"; then
    echo "multihost-check: skipped: cannot create network namespaces here ($(cat "$MH_TMP/err"));" \
      "run as root on a machine that permits 'ip netns add', or do the manual check in" \
      "docs/multi-host.md" >&2
    exit 77
  fi
  if [[ $(nproc) -lt 2 ]]; then
    echo "multihost-check: needs 2 CPUs (one per simulated host), this machine gives $(nproc)" >&2
    exit 1
  fi
  ip netns add "$MH_NS_B" &&
    ip link add "$MH_VETH_A" type veth peer name "$MH_VETH_B" &&
    ip link set "$MH_VETH_A" netns "$MH_NS_A" &&
    ip link set "$MH_VETH_B" netns "$MH_NS_B" &&
    ip -n "$MH_NS_A" addr add $MH_ADDR_A/24 dev "$MH_VETH_A" &&
    ip -n "$MH_NS_B" addr add $MH_ADDR_B/24 dev "$MH_VETH_B" &&
    ip -n "$MH_NS_A" link set lo up && ip -n "$MH_NS_B" link set lo up &&
    ip -n "$MH_NS_A" link set "$MH_VETH_A" up && ip -n "$MH_NS_B" link set "$MH_VETH_B" up &&
    ip netns exec "$MH_NS_A" sysctl -qw net.ipv4.tcp_retries2=4 &&
    ip netns exec "$MH_NS_B" sysctl -qw net.ipv4.tcp_retries2=4 ||
    {
      echo "multihost-check: setting up the namespaces failed" >&2
      exit 1
    }

  # The launch agent mpirun calls instead of ssh: `agent HOST COMMAND...`.
  cat >"$MH_TMP/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case \$host in
  $MH_ADDR_B) ns=$MH_NS_B; name=$MH_HOST_B; cpu=1 ;;
  *) ns=$MH_NS_A; name=$MH_HOST_A; cpu=0 ;;
esac
exec ip netns exec \$ns unshare --uts sh -c "hostname \$name && exec taskset -c \$cpu \$*"
AGENT
  chmod +x "$MH_TMP/agent"
  printf '%s slots=2\n%s slots=2\n' $MH_ADDR_A $MH_ADDR_B >"$MH_TMP/hosts"
}

# Shapes both directions of the link between the hosts with a token bucket: mh_shape RATE
# (a tc rate such as 1gbit). tbf, not netem: the kernels these checks run on may lack netem.
mh_shape() {
  ip netns exec "$MH_NS_A" tc qdisc replace dev "$MH_VETH_A" root tbf rate "$1" burst 256kb \
    latency 50ms &&
    ip netns exec "$MH_NS_B" tc qdisc replace dev "$MH_VETH_B" root tbf rate "$1" burst 256kb \
      latency 50ms
}

# mpirun on host A over both hosts, MPI and its daemons on TCP over the veth only:
# mh_mpirun SECONDS MPIRUN_ARGS_AND_COMMAND...   (killed after SECONDS).
mh_mpirun() {
  local seconds=$1
  shift
  ip netns exec "$MH_NS_A" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$MH_HOST_A" \
    timeout -s KILL "$seconds" taskset -c 0 mpirun --allow-run-as-root --bind-to none \
    --hostfile "$MH_TMP/hosts" \
    --mca plm_rsh_agent "$MH_TMP/agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,self --mca btl_tcp_if_include $MH_SUBNET \
    --mca oob_tcp_if_include $MH_SUBNET "$@"
}
