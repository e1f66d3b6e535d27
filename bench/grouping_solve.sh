#!/usr/bin/env bash
# EPP's pipeline grouping charged by the recompute solve, before and after, on the twelve paper
# settings: predicted step time and planning time of a base build and of this one, in turns.
#   INFINIPIPE_BASE_BIN=<base build>/infinipipe bash bench/grouping_solve.sh
set -euo pipefail
exec python3 "$(dirname "$0")/grouping_solve.py" "$@"
