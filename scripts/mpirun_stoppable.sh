#!/usr/bin/env bash
# Runs `mpirun ARGS...` so that Ctrl-C (or a SIGTERM to this script) stops an `infinipipe train`
# job the way that keeps its work: after the current iteration, with a checkpoint, every rank
# exiting 0. OpenMPI's mpirun ends the whole job on SIGINT or SIGTERM, killing the ranks a
# second later, but relays SIGUSR1 to every rank untouched; so mpirun runs in its own process
# group, where the terminal's Ctrl-C does not reach it, and this script forwards each SIGINT or
# SIGTERM it gets as SIGUSR1. A second Ctrl-C (a second or more after the first) stops at once.
# The exit status is mpirun's.
set -uo pipefail
set -m  # background jobs get their own process group
mpirun "$@" < /dev/null &
job=$!
set +m
trap 'echo "mpirun_stoppable: stopping after the current iteration (Ctrl-C again to stop at once)" >&2; kill -USR1 "$job" 2>/dev/null' INT TERM
rc=0
while kill -0 "$job" 2>/dev/null; do
  wait "$job"
  rc=$?
done
exit "$rc"
