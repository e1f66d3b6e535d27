#!/usr/bin/env bash
# `make demo-torch`: a small Llama trained with EPP plans through PyTorch (infinipipe.torch) on 4
# CPU processes, pipeline 2 x data-parallel 2, then `infinipipe report` of the run: the plans'
# predictions against what PyTorch measured. Everything it writes goes to out/demo-torch/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/infinipipe
out=out/demo-torch
rm -rf "$out"
mkdir -p "$out"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. A synthetic long-tail corpus"
$bin data synth --distribution github --num-documents 2000 --seq-length 1024 --seed 1 \
  --output "$out/corpus"

step "2. Training on PyTorch: 4 processes (pp 2 x dp 2, gloo), EPP plans under 32 MiB per rank"
# More ranks than cores: one thread each. The same flags train with `infinipipe train`.
OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 \
  -x OMP_NUM_THREADS scripts/python -m infinipipe.torch.train --data-path "$out/corpus" --pp 2 --dp 2 \
  --num-layers 4 --hidden-size 128 --num-attention-heads 4 --group-query-attention \
  --num-query-groups 2 --untie-embeddings-and-output-weights --seq-length 1024 \
  --global-batch-size 8 --train-iters 60 --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 5 \
  --lr-decay-style cosine --weight-decay 0.1 --memory-budget 32MiB --device cpu \
  --log-interval 5 --trace "$out/run" --save "$out/checkpoints"

step "3. The plans' predictions against the PyTorch run (infinipipe report)"
# Through a file: `head` closing a pipe early would end the report (and the demo) with SIGPIPE.
$bin report "$out/run" >"$out/report.txt"
head -40 "$out/report.txt"
echo
echo "the whole report: $out/report.txt and $out/run/report.html; the checkpoint ($out/checkpoints) resumes in either"
echo "runtime: \`infinipipe train --load $out/checkpoints ...\` or \`scripts/python -m infinipipe.torch.train --load ...\`"
