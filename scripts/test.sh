#!/usr/bin/env bash
# `make test`: every phase of the suite on a fresh machine, then how long each took.
#   deps        apt packages (scripts/install-deps.sh; only checks when all are present)
#   build       the release build (unity: one translation unit per folder, build/)
#   ctest       every test of the release build
#   fuzz        the parsers and their libFuzzer targets under clang + ASan/UBSan (build-fuzz/),
#               then each target over its seeds and reproducers and FUZZ_RUNS inputs each from
#               seed 1, a target per core at a time: all beside ctest at a lower priority; its
#               time is the wait for it after the tests
# A failing phase stops the run (its exit code is the script's); the times so far are printed.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
names=()
secs=()
summary() {
  echo "== make test: phase times"
  local total=0
  for i in "${!names[@]}"; do
    printf '   %-11s %5d s\n' "${names[$i]}" "${secs[$i]}"
    total=$((total + secs[i]))
  done
  printf '   %-11s %5d s\n' total "$total"
}
phase() {
  local name=$1
  shift
  echo "== make test: $name"
  local start=$SECONDS
  "$@"
  local rc=$?
  names+=("$name")
  secs+=($((SECONDS - start)))
  if [ $rc -ne 0 ]; then
    summary
    echo "== make test: $name failed (exit $rc)"
    exit $rc
  fi
}
phase deps bash scripts/install-deps.sh
phase build bash -c "cmake --preset release && cmake --build --preset release -j $jobs"
# The fuzz targets build (clang, their own folder) and run beside the tests, at a lower
# priority: the tests leave about a sixth of the cores idle (waits on MPI peers and deadlines,
# process start-up), which the fuzz work fills.
fuzz_log=$(mktemp)
setsid -w nice -n 10 bash -c "cmake --preset fuzz && cmake --build --preset fuzz -j $jobs &&
  ctest --test-dir build-fuzz -L fuzz --output-on-failure &&
  FUZZ_RUNS=${FUZZ_RUNS:-20000} JOBS=$jobs bash scripts/fuzz.sh" >"$fuzz_log" 2>&1 &
fuzz_pid=$!
trap 'kill -- "-$fuzz_pid" 2>/dev/null; rm -f "$fuzz_log"' EXIT  # its own process group
fuzz_wait() {
  wait "$fuzz_pid"
  local rc=$?
  tail -n 40 "$fuzz_log"
  return $rc
}
# As many tests as cores: one more (tried 2026-12-07) was slower, 1,067 s against 954 s, and
# left Python ranks killed and timed out. The timed tests (labels *_timed) run alone, at the end.
# Tried 2026-12-07: running them one at a time beside the others at nice 10 took 596-706 s
# against 812 s, but in one run of four two of them failed (a slowed link the fit did not
# notice; profile's link fit refusing noisy times), so they stay alone until both hold under load.
phase ctest ctest --preset release -j "$jobs" --timeout 600
phase fuzz fuzz_wait
summary
