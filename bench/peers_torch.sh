#!/usr/bin/env bash
# EPP (infinipipe.torch) against torch.distributed.pipelining's GPipe, 1F1B, interleaved 1F1B and
# zero-bubble schedules on the same Llama, long-tail corpus and global batches, pp 2 and pp 4 on
# CPU/gloo (bench/peers_torch.py); real tokens/s and peak memory per rank, one markdown table.
#   bash bench/peers_torch.sh --quick                     # pp 2, two schedules: a smoke check
#   bash bench/peers_torch.sh --out peers.md              # the full run
#   bash bench/peers_torch.sh --distributions "github commoncrawl" --launcher mpirun
set -euo pipefail
here="$(dirname "$0")"
exec "$here/../scripts/python" "$here/peers_torch.py" "$@"
