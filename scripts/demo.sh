#!/usr/bin/env bash
# The headline demonstration (`make demo`): a long-tail corpus, the plans EPP makes for it next
# to every baseline schedule, and a small Llama really training on it with EPP plans.
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

step "4. Training a small Llama with EPP plans under a memory budget"
OMP_WAIT_POLICY=passive $bin train --data-path "$out/corpus" \
  --num-layers 4 --hidden-size 128 --num-attention-heads 4 --num-query-groups 2 \
  --seq-length 2048 --global-batch-size 8 --train-iters 60 --lr 3e-3 --min-lr 3e-4 \
  --lr-warmup-iters 5 --memory-budget 96MiB --log-interval 10 \
  --save "$out/checkpoints" --save-interval 30 --metrics "$out/metrics.jsonl"

step "Done"
echo "written to $out/: compare-llama7b-48k.md, plan.json, gantt.svg, metrics.jsonl, checkpoints/"
