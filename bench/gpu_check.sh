#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py: attention kernels, the executor against the C++ engine, bf16
# EPP against 1F1B with tokens/s, MFU and peak memory against the plan, a GPU calibration file),
# in at most ~8 minutes on one H100. On a GPU machine without this project's build dependencies,
# run it with a bundle made here (bash bench/gpu_bundle.sh): its module, libraries and reference.
#
#   bash bench/gpu_check.sh --bundle gpu-bundle         # --device cuda, results in gpu-check/
#   bash bench/gpu_check.sh --device cpu --quick        # the same phases here, with build/python
#
# PYTHON (default python3) is the Python with torch. Without --bundle the module is
# INFINIPIPE_PYTHON_DIR, else build/python (a full build, whose engine makes the reference).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
bundle=no
for arg in "$@"; do
  [ "$arg" = "--bundle" ] && bundle=yes
done
if [ "$bundle" = no ]; then
  module=${INFINIPIPE_PYTHON_DIR:-build/python}
  if [ ! -d "$module/infinipipe" ]; then
    echo "gpu_check: no module in $module: build it (cmake --preset release && cmake --build" \
      "--preset release), or give a bundle (--bundle DIR, made by bash bench/gpu_bundle.sh)" >&2
    exit 2
  fi
  export PYTHONPATH=$module${PYTHONPATH:+:$PYTHONPATH}
fi
exec "$py" bench/gpu_check.py "$@"
