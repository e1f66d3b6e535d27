#!/usr/bin/env bash
# Regenerates the seed corpora under fuzz/corpus/ from files the project itself writes: a tiny
# run of `data prepare`, `plan`, `train --save --trace` and the examples. Each seed stays a few
# KB so libFuzzer's mutations stay fast. Usage: bash scripts/fuzz_seeds.sh [build/infinipipe]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/infinipipe}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
corpus=fuzz/corpus
rm -rf "$corpus"
mkdir -p "$corpus"/{config_yaml,megatron_idx,safetensors,checkpoint_json,plan_json,calibration_json,trace_json,metrics_jsonl,data_prepare,cost_fit_json,tokenizer_config_json,hf_folder}

# data prepare: its JSON-lines input and the indexed dataset it writes.
printf '%s\n' '{"text": "hello world"}' '{"text": "a second, longer document: ünïcødé"}' \
  '' '{"text": "", "id": 3}' '{"id": 4, "text": "tokens\nwith\tescapes"}' >"$tmp/docs.jsonl"
cp "$tmp/docs.jsonl" "$corpus/data_prepare/docs.jsonl"
printf '%s\n' '{"text": "x"}' >"$corpus/data_prepare/one.jsonl"
$bin data prepare --input "$tmp/docs.jsonl" --output "$tmp/docs" --append-eod >/dev/null
cp "$tmp/docs.idx" "$corpus/megatron_idx/docs.idx"
$bin data synth --num-documents 6 --seq-length 64 --seed 3 --output "$tmp/synth" >/dev/null
cp "$tmp/synth.idx" "$corpus/megatron_idx/synth.idx"

# Configuration files: the examples, and what `config show` prints for one of them.
cp examples/cpu-small.yaml examples/llama7b-48k.yaml "$corpus/config_yaml/"
$bin config show --config examples/cpu-small.yaml >"$corpus/config_yaml/shown.yaml"

cp examples/calibration-cpu.json "$corpus/calibration_json/"

# A small model's plan, checkpoint and trace.
model=(--hidden-size 8 --ffn-hidden-size 8 --num-attention-heads 2 --seq-length 64
  --vocab-size 257 --tie-embeddings)
printf '%s\n' 64 40 17 9 >"$tmp/lengths.txt"
$bin plan "${model[@]}" --num-layers 2 --pp 2 --num-devices 2 --global-batch-size 4 --lengths "$tmp/lengths.txt" \
  --out "$corpus/plan_json/plan.json" >/dev/null
$bin plan "${model[@]}" --num-layers 2 --pp 2 --num-devices 2 --global-batch-size 4 --lengths "$tmp/lengths.txt" \
  --explain --out "$corpus/plan_json/plan-explained.json" >/dev/null
OMP_NUM_THREADS=1 $bin train "${model[@]}" --num-layers 1 --data-path "$tmp/synth" --global-batch-size 2 \
  --train-iters 2 --save "$tmp/ckpt" --trace "$tmp/run" --quiet >/dev/null
iter=$(ls -d "$tmp"/ckpt/iter_* | tail -1)
for f in state.json config.json model.safetensors.index.json optimizer.safetensors.index.json; do
  cp "$iter/$f" "$corpus/checkpoint_json/$f"
done
cp "$iter"/model*.safetensors "$corpus/safetensors/"
# The online cost fit's state (--cost-model-update online, the default) and the tokenizer config
# every save keeps.
cp "$iter"/cost-fit-rank00000.json "$corpus/cost_fit_json/"
cp "$iter"/tokenizer_config.json "$corpus/tokenizer_config_json/"
cp "$tmp"/run/trace-rank*.json "$corpus/trace_json/"
cp "$tmp"/run/metrics.jsonl "$corpus/metrics_jsonl/"
cp "$tmp"/run/plans/*.json "$corpus/plan_json/"
# A Hugging Face folder as fuzz_hf_folder takes it: config.json, a NUL byte, model.safetensors;
# and the same with an extra layer's tensor and a RoPE buffer appended (the Python below).
{ cat "$iter/config.json"; printf '\0'; cat "$iter/model.safetensors"; } >"$corpus/hf_folder/llama-1-layer"
python3 - "$corpus/hf_folder/llama-1-layer" "$corpus/hf_folder/extra-layer-and-rope-buffer" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
cut = raw.index(b"\0")
cfg, st = raw[:cut], raw[cut + 1:]
n = struct.unpack("<Q", st[:8])[0]
h, data = json.loads(st[8:8 + n]), st[8 + n:]
h["model.layers.1.mlp.up_proj.weight"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
h["model.layers.0.self_attn.rotary_emb.inv_freq"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data) + 4, len(data) + 8]}
t = json.dumps(h).encode()
t += b" " * ((8 - len(t) % 8) % 8)
open(sys.argv[2], "wb").write(cfg + b"\0" + struct.pack("<Q", len(t)) + t + data + b"\0" * 8)
PY
du -b "$corpus"/*/* | sort -n | tail -5
