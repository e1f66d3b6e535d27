#!/usr/bin/env bash
# The PyTorch executor against the C++ engine on this CPU (bench/torch_engine.py); ~5 minutes.
#   ITERS=12 ROUNDS=3 LAYOUTS="1x1 2x2" bash bench/torch_engine.sh
set -euo pipefail
exec python3 "$(dirname "$0")/torch_engine.py" "$@"
