#!/usr/bin/env bash
# Runs every libFuzzer target of build-fuzz/ (the `fuzz` preset) for FUZZ_SECONDS each, JOBS of
# them at a time (default: the number of cores; each target is one process), starting from the
# committed seeds (fuzz/corpus/<target>) and growing a working corpus in
# build-fuzz/corpus/<target>. A finding (crash, sanitizer report, leak, timeout, uncaught
# exception) is written to build-fuzz/findings/<target>/ and fails the script: minimise it and
# commit it under fuzz/regressions/<target>/ with the fix, so ctest replays it from then on.
# Usage: FUZZ_SECONDS=60 bash scripts/fuzz.sh [target...]
#        FUZZ_RUNS=20000 bash scripts/fuzz.sh   (that many inputs each, from seed 1: the same
#        amount of work on a slow or loaded machine)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
limit=(-max_total_time="$seconds")
[ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS" -seed=1)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(config_yaml megatron_idx safetensors checkpoint_json plan_json calibration_json
    trace_json metrics_jsonl data_prepare cost_fit_json tokenizer_config_json hf_folder
    hf_tokenizer prepared_tokenizer)
fi
jobs=${JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  [ -x "build-fuzz/fuzz/fuzz_$t" ] || {
    echo "fuzz: build-fuzz/fuzz/fuzz_$t is missing; run \`make fuzz\` (it builds them)"
    exit 2
  }
done

# One target: its table row goes to build-fuzz/findings/<target>/result.
fuzz_one() {
  local t=$1
  local bin=build-fuzz/fuzz/fuzz_$t
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  local seeds=(fuzz/corpus/"$t")
  [ -d "fuzz/regressions/$t" ] && seeds+=(fuzz/regressions/"$t")
  local log=build-fuzz/findings/$t/last-run.log
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 "$bin" "${limit[@]}" \
    -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/findings/$t/" "build-fuzz/corpus/$t" "${seeds[@]}" >"$log" 2>&1
  local rc=$?
  local runs speed cov result=ok
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  [ $rc -ne 0 ] && result="FINDING (see $log)"
  printf '%-22s %10s %8s %6s %s\n' "$t" "${runs:-?}" "${speed:-?}" "${cov:-?}" "$result" \
    >"build-fuzz/findings/$t/result"
}

for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  rm -f "build-fuzz/findings/$t/result"
  fuzz_one "$t" &
done
wait

status=0
printf '%-22s %10s %8s %6s %s\n' target runs exec/s cov result
for t in "${targets[@]}"; do
  row=$(cat "build-fuzz/findings/$t/result" 2>/dev/null) || row="$t: no result (the run died)"
  echo "$row"
  [[ "$row" == *" ok" ]] || status=1
done
exit $status
