#!/usr/bin/env bash
# The PyTorch executor against the C++ engine on this CPU (bench/torch_engine.py), the PyTorch side
# on the project's Python (scripts/python: the pinned PyTorch); ~7 minutes.
#   ITERS=12 ROUNDS=3 LAYOUTS="1x1 2x2" WAIT_POLICIES=passive bash bench/torch_engine.sh
set -euo pipefail
here="$(dirname "$0")"
exec "$here/../scripts/python" "$here/torch_engine.py" "$@"
