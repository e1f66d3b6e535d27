#!/usr/bin/env bash
# The paper's settings (Llama 7B/13B/30B, 32 A800s, 48K/96K, GitHub/CommonCrawl-like lengths)
# simulated with `infinipipe simulate --compare`, the paper's baselines first, then the tuned ones;
# prints EPP's speedups next to the paper's; then the paper's other figures (ZeRO-1 vs ZeRO-3,
# the 13B case study in the paper's four parts, context scaling 64K -> 192K, global batch
# 128 -> 512, the ablation at 13B 64K, the planner's time).
#   bash bench/paper_settings.sh   (~7 minutes on 2 loaded cores: 20 global batches per setting,
#                                   the paper's 20 iterations; ITERATIONS=N for fewer;
#                                   INFINIPIPE_BUILD_DIR=... to pick the build)
set -euo pipefail
python3 "$(dirname "$0")/paper_settings.py" "$@"
exec python3 "$(dirname "$0")/paper_figures.py"
