#!/usr/bin/env bash
# The paper's settings (Llama 7B/13B/30B, 32 A800s, 48K/96K, GitHub/CommonCrawl-like lengths)
# simulated with `infinipipe simulate --compare`, the paper's baselines first, then the tuned ones;
# prints EPP's speedups next to the paper's.
#   bash bench/paper_settings.sh        (seconds; INFINIPIPE_BUILD_DIR=... to pick the build)
set -euo pipefail
exec python3 "$(dirname "$0")/paper_settings.py" "$@"
