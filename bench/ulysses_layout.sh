#!/usr/bin/env bash
# EPP at pp 1 in the tuned Ulysses baseline's own layout on the paper's twelve settings, with
# ZeRO-1 and ZeRO-3; markdown.
#   bash bench/ulysses_layout.sh     (about 15 s; BEFORE=path/to/infinipipe adds its EPP columns)
set -euo pipefail
exec python3 "$(dirname "$0")/ulysses_layout.py" "$@"
