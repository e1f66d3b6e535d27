#!/usr/bin/env bash
# Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh (core_v0.15.0) run by `infinipipe
# train`, its flags unchanged but sized down to train in seconds on a CPU. What is left out and
# why is in docs/megatron.md ("The Llama example").
#   examples/megatron-llama.sh [OUT_DIR] [EXTRA infinipipe FLAGS...]
# EXTRA may give back the Megatron-LM flags left out here (--bf16 --fp8-format hybrid ...): train
# then refuses them all in one message, each with its reason (exit 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${INFINIPIPE:-build/infinipipe}
OUT=${1:-out/megatron-llama}
shift || true
CHECKPOINT_PATH="$OUT/checkpoints"
mkdir -p "$OUT"

# Sized down from 32 layers x 4096 at 8192 tokens on 8 GPUs.
PP_SIZE=${PP_SIZE:-2}
NUM_LAYERS=4
SEQ_LENGTH=512
MAX_POSITION_EMBEDDINGS=512
MICRO_BATCH_SIZE=1
GLOBAL_BATCH_SIZE=8
TRAIN_ITERS=${TRAIN_ITERS:-6}
TRAIN_SAMPLES=$((TRAIN_ITERS * GLOBAL_BATCH_SIZE))

# Megatron's --mock-data: a synthetic corpus on disk instead.
DATA_PREFIX="$OUT/corpus"
[[ -f "$DATA_PREFIX.idx" ]] || "$BIN" data synth --distribution github --num-documents 200 \
  --seq-length "$SEQ_LENGTH" --seed 1 --output "$DATA_PREFIX" > /dev/null

MODEL_ARGS=(
    --use-mcore-models
    --num-layers $NUM_LAYERS
    --hidden-size 128
    --ffn-hidden-size 448
    --num-attention-heads 4
    --group-query-attention
    --num-query-groups 2
    --kv-channels 32
    --seq-length $SEQ_LENGTH
    --max-position-embeddings $MAX_POSITION_EMBEDDINGS
    --position-embedding-type rope
    --rotary-base 1000000
    --rotary-percent 1.0
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --swiglu
    --init-method-std 0.0134
    --attention-backend fused
    --apply-layernorm-1p
    --untie-embeddings-and-output-weights
    --disable-bias-linear
)

TRAINING_ARGS=(
    --micro-batch-size $MICRO_BATCH_SIZE
    --global-batch-size $GLOBAL_BATCH_SIZE
    --train-samples $TRAIN_SAMPLES
    --lr-decay-samples $TRAIN_SAMPLES
    --lr-warmup-samples $GLOBAL_BATCH_SIZE
    --lr 0.00015
    --min-lr 0.00001
    --lr-decay-style cosine
    --clip-grad 1.0
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --cross-entropy-loss-fusion
    --calculate-per-token-loss
    --manual-gc
    --empty-unused-memory-level 1
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --context-parallel-size 1
    --pipeline-model-parallel-size $PP_SIZE
    --sequence-parallel
)

DDP_ARGS=(
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)
TRAINING_ARGS+=("${DDP_ARGS[@]}")

DATA_ARGS_LIST=(
    --data-path "$DATA_PREFIX"
    --split '99,1,0'
    --vocab-size 257
    --data-cache-path "$OUT/cache"
    --no-create-attention-mask-in-dataloader
    --no-mmap-bin-files
    --num-workers 1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 1
    --eval-iters 1
    --eval-interval 100
    --exit-duration-in-mins 230
    --tensorboard-dir "$OUT/tensorboard"
    --save-interval 1000
    --log-throughput
    --distributed-timeout-minutes 60
    --save "$CHECKPOINT_PATH"
    --load "$CHECKPOINT_PATH"
)

# torchrun's place: one MPI rank per pipeline stage, one OpenMP thread each.
LAUNCH=()
if (( PP_SIZE > 1 )); then
  LAUNCH=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$PP_SIZE"
          env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive)
fi

"${LAUNCH[@]}" "$BIN" train \
    "${MODEL_ARGS[@]}" \
    "${TRAINING_ARGS[@]}" \
    "${MODEL_PARALLEL_ARGS[@]}" \
    "${DATA_ARGS_LIST[@]}" \
    "${EVAL_AND_LOGGING_ARGS[@]}" \
    --metrics "$OUT/metrics.jsonl" \
    "$@"
