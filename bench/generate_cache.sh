#!/usr/bin/env bash
# Decoding speed of `infinipipe generate` with the K/V cache against rerunning the whole prefix
# for every token (--no-kv-cache), on the demo's model shape (4 layers, hidden 128, 2048
# positions), one thread, greedy; prints markdown. The speed does not depend on the weights, so
# the model is trained 2 iterations only.
#   bash bench/generate_cache.sh   (INFINIPIPE_BUILD_DIR picks the build, default build/;
#                                   NEW_TOKENS, default 256)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${INFINIPIPE_BUILD_DIR:-build}/infinipipe
new=${NEW_TOKENS:-256}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

$bin data synth --distribution github --num-documents 200 --seq-length 2048 --seed 1 \
  --output "$work/corpus" >/dev/null
$bin train --data-path "$work/corpus" --num-layers 4 --hidden-size 128 --num-attention-heads 4 \
  --num-query-groups 2 --seq-length 2048 --global-batch-size 8 --train-iters 2 \
  --lr-warmup-iters 0 --save "$work/ckpt" --quiet >/dev/null
# Prompts of the corpus's text (its byte tokens, end-of-document tokens skipped).
# (awk reads all its input: an early exit would end od by SIGPIPE, a failure under pipefail.)
prompt_of() {
  head -c $((8 * $1)) "$work/corpus.bin" | od -A n -t u2 -v |
    awk -v n="$1" '{for (i = 1; i <= NF; i++) if ($i != 256 && k < n) { printf "%c", $i; k++ }}' \
      >"$work/prompt-$1.txt"
  [ "$(wc -c <"$work/prompt-$1.txt")" -eq "$1" ] || { echo "a prompt of $1 bytes is too long for the corpus" >&2; exit 1; }
}
rate() {  # tokens/s of the summary line
  $bin generate --load "$work/ckpt" --prompt-file "$work/prompt-$1.txt" --max-new-tokens "$new" \
    --greedy "${@:2}" 2>&1 >/dev/null | sed -n 's/.*then \([0-9.]*\) tokens\/s.*/\1/p'
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| prompt tokens | new tokens | K/V cache (tokens/s) | no K/V cache (tokens/s) | speedup |"
echo "|---|---|---|---|---|"
for p in 16 256 1024; do
  prompt_of "$p"
  cached=$(rate "$p")
  uncached=$(rate "$p" --no-kv-cache)
  speedup=$(awk -v a="$cached" -v b="$uncached" 'BEGIN { printf "%.0f×", a / b }')
  echo "| $p | $new | $cached | $uncached | $speedup |"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
