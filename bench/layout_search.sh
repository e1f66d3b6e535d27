#!/usr/bin/env bash
# `infinipipe plan --search-layout` on one paper setting: its wall time, the load average around
# it, the ten best layouts and the infeasible count; markdown.
#   EXAMPLE=llama13b-96k DIST=github ITERS=4 bash bench/layout_search.sh
#   EXTRA=--search-layout-exhaustive ...   (every layout planned, for the pruning's gain)
#   (INFINIPIPE_BUILD_DIR picks the build, default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${INFINIPIPE_BUILD_DIR:-build}/infinipipe"
EXAMPLE="${EXAMPLE:-llama13b-96k}"
DIST="${DIST:-github}"
ITERS="${ITERS:-4}"
EXTRA="${EXTRA:-}"
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
load_before=$(cut -d' ' -f1 /proc/loadavg)
TIMEFORMAT='%R %U %S'
times=$( { time "$BIN" plan --search-layout --config "examples/$EXAMPLE.yaml" \
  --distribution "$DIST" --search-iterations "$ITERS" $EXTRA > "$OUT"; } 2>&1 )
read -r wall user sys <<< "$times"
load_after=$(cut -d' ' -f1 /proc/loadavg)
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- command: \`infinipipe plan --search-layout --config examples/$EXAMPLE.yaml --distribution $DIST --search-iterations $ITERS${EXTRA:+ $EXTRA}\`"
echo "- tree: commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' + uncommitted changes')"
echo "- cores: $(nproc); load average (1 min) before $load_before, after $load_after"
echo "- wall time: $wall s; CPU: $user s user + $sys s system"
echo
head -1 "$OUT"
echo
sed -n '3,14p' "$OUT"
echo
grep -E '^(best:|\()' "$OUT"
