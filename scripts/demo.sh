#!/usr/bin/env bash
# The headline demonstration (`make demo`): a long-tail corpus, the plans EPP makes for it next
# to every baseline schedule, and a small Llama really training on it with EPP plans over MPI,
# then generating text.
# Everything it writes goes to out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/infinipipe
out=out/demo
mkdir -p "$out"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. A synthetic long-tail corpus (GitHub-like lengths, learnable text)"
$bin data synth --distribution github --num-documents 4000 --seq-length 2048 --seed 1 \
  --output "$out/corpus"
$bin data stats --data-path "$out/corpus" --seq-length 2048

step "2. The paper's setting, simulated: Llama 7B on 32 A800s, 48K, global batch 512"
$bin simulate --compare --config examples/llama7b-48k.yaml --distribution github | tee "$out/compare-llama7b-48k.md"

step "3. One EPP plan for this machine, with its Gantt chart"
$bin plan --config examples/cpu-small.yaml --lengths examples/lengths-small.txt --out "$out/plan.json" \
  --svg "$out/gantt.svg"

step "4. Calibrating the cost model on this machine's real kernels (one thread, as each rank has)"
OMP_NUM_THREADS=1 $bin profile --num-layers 4 --hidden-size 128 --num-attention-heads 4 \
  --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights \
  --seq-length 2048 --threads 1 --out "$out/calibration.json"

step "5. Training a small Llama on 4 MPI ranks (pp 2 x dp 2) with EPP plans under a memory budget"
# 2% of the documents are held out: every 50 iterations the validation loss over 2 batches of
# them, on forward-only EPP plans through the same pipeline.
echo "Ctrl-C stops after the current iteration with a checkpoint that resumes exactly (again: at once)."
# More ranks than cores: one OpenMP thread each, waiting passively, ranks free to run on either
# core (pinned to cores in turn, `--map-by core --bind-to core:overload-allowed`, the actions are
# predicted better but the run is slower: docs/benchmarks.md, "Ranks pinned to cores").
# mpirun_stoppable.sh turns Ctrl-C into the SIGUSR1 mpirun relays to every rank (a Ctrl-C to
# mpirun itself ends the job).
train=(env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive $bin train --data-path "$out/corpus"
  --pp 2 --dp 2 --num-layers 4 --hidden-size 128 --num-attention-heads 4 --group-query-attention
  --num-query-groups 2 --untie-embeddings-and-output-weights --seq-length 2048
  --global-batch-size 8 --train-iters 200 --lr 3e-3 --min-lr 3e-4
  --split 98,2,0 --eval-interval 50 --eval-iters 2
  --lr-warmup-iters 10 --lr-decay-style cosine --adam-beta2 0.95 --weight-decay 0.1
  --memory-budget 64MiB --log-interval 20 --calibration "$out/calibration.json"
  --save "$out/checkpoints" --save-interval 100)
launch=(bash scripts/mpirun_stoppable.sh --allow-run-as-root --oversubscribe --bind-to none -np 4)
stopped=no
trap 'stopped=yes' INT
"${launch[@]}" "${train[@]}" --trace "$out/run"
trap - INT
latest=$(cat "$out/checkpoints/latest_checkpointed_iteration.txt" 2>/dev/null || echo none)
if [ "$stopped" = yes ] && [ "$latest" != 200 ]; then
  echo
  echo "stopped with the checkpoint of iteration $latest in $out/checkpoints; continue the run with:"
  # The same flags and --load: the checkpoint keeps the online cost fit, so the next plans are
  # the ones the run would have made; later plans follow times measured after the resume.
  printf ' %q' "${launch[@]}" "${train[@]}" --load "$out/checkpoints"
  echo
  exit 0
fi

step "6. Predicted vs measured: the run's traces against its plans"
$bin report "$out/run"

step "7. Text from the trained model: a prompt from its corpus, continued (K/V cache, streamed)"
# The corpus's first 60 characters (its tokens are bytes, stored as uint16; 256 ends a document).
prompt=$(head -c 240 "$out/corpus.bin" | od -A n -t u2 -v |
  awk '{for (i = 1; i <= NF; i++) if ($i != 256 && k < 60) { printf "%c", $i; k++ }}')
$bin generate --load "$out/checkpoints" --prompt "$prompt" --max-new-tokens 200 --temperature 0.7 \
  --seed 1

step "Done"
echo "written to $out/: compare-llama7b-48k.md, plan.json, gantt.svg, calibration.json, checkpoints/, run/ (a Chrome"
echo "trace per rank for Perfetto, plans, metrics.jsonl, and report.html: open it in a browser)"
