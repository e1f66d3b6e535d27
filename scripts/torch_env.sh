# Sourced by scripts/install-deps.sh and scripts/python: the pinned PyTorch of infinipipe.torch
# and the virtual environment that holds it. The Linux wheels on PyPI are CUDA builds of several
# GB, so the environment lives outside the checkout, named by its Python and PyTorch, and every
# clone on the machine shares it (INFINIPIPE_VENV overrides the place).
# The Python it is made from is Debian's: python3-dev and pybind11-dev build `import infinipipe`
# for that one. TORCH_VERSION is the newest release pip offered for it when pinned.
INFINIPIPE_BASE_PYTHON=${INFINIPIPE_BASE_PYTHON:-/usr/bin/python3}
TORCH_VERSION=2.15.0
# What the environment holds, pinned; install-deps.sh installs it again when this changes.
# transformers: the Hugging Face models infinipipe.torch.hf trains with their own modelling code.
INFINIPIPE_VENV_REQUIREMENTS="torch==$TORCH_VERSION numpy==2.4.6 transformers==5.23.0"
if [ -z "${INFINIPIPE_VENV:-}" ]; then
  _py_version=$("$INFINIPIPE_BASE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' \
    2>/dev/null || echo none)
  INFINIPIPE_VENV=${XDG_CACHE_HOME:-$HOME/.cache}/infinipipe/venv-torch$TORCH_VERSION-py$_py_version
fi
# Written last by install-deps.sh, holding the requirements: a half-made environment is redone.
INFINIPIPE_VENV_STAMP="$INFINIPIPE_VENV/.infinipipe-requirements"
